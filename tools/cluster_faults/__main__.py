"""``python -m tools.cluster_faults``: the fault matrix and random fault schedules by hand.

    python -m tools.cluster_faults --cluster kafka --proxied matrix
    python -m tools.cluster_faults --cluster kbroker random --schedules 100 --seconds 60 --seed 1
    python -m tools.cluster_faults --attach cluster.json matrix      # someone else's cluster

Prints each schedule's figures and a SUMMARY line (schedules, acked, lost, duplicated); with
``--out FILE`` appends one JSON line per schedule. Exit status 1 if any schedule failed a check.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from . import run
from .cluster import attach, launch


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.cluster_faults", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--cluster", choices=("kafka", "kbroker"),
                       help="launch this cluster (Apache Kafka 3.9 reference or kbroker)")
    where.add_argument("--attach", metavar="JSON", help="a running cluster's --json file")
    ap.add_argument("--proxied", action="store_true",
                    help="put proxies on every link, enabling network faults (launched only)")
    ap.add_argument("--workdir", help="default: a temp dir")
    ap.add_argument("--out", help="append one JSON line per schedule here")
    ap.add_argument("--group-protocol", choices=("classic", "consumer"), default="classic",
                    help="the VerifiableConsumer's group protocol (consumer: KIP-848)")
    sub = ap.add_subparsers(dest="mode", required=True)
    m = sub.add_parser("matrix", help="each fault on each target, one at a time")
    m.add_argument("--hold", type=float, default=8.0)
    m.add_argument("--only", help="comma-separated fault names to keep")
    m.add_argument("--targets", help="comma-separated targets to keep (leader, follower, "
                                     "controller, coordinator, zookeeper)")
    r = sub.add_parser("random", help="seeded random schedules")
    r.add_argument("--schedules", type=int, default=10)
    r.add_argument("--seconds", type=float, default=60)
    r.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="cluster-faults-"))
    if args.attach:
        cluster = attach(args.attach)
    else:
        cluster = launch(args.cluster, workdir, proxied=args.proxied)
    proxied = cluster.proxies is not None
    try:
        if args.mode == "matrix":
            schedules = run.matrix(proxied, args.hold)
            if args.only:
                keep = set(args.only.split(","))
                schedules = [s for s in schedules if s[0].fault in keep]
            if args.targets:
                keep = set(args.targets.split(","))
                schedules = [s for s in schedules if s[0].target in keep]
        else:
            schedules = run.random_schedules(args.schedules, args.seconds, args.seed, proxied,
                                             cluster.session_timeout_s)
        report = run.run_all(cluster, schedules, workdir, Path(args.out) if args.out else None,
                             prefix="m" if args.mode == "matrix" else f"r{args.seed}-",
                             strict=args.mode == "matrix",
                             group_protocol=args.group_protocol)
    finally:
        cluster.close()
    return 0 if not report["summary"]["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
