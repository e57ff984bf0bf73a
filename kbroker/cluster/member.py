"""One broker of an experimental ZooKeeper cluster: ``python -m kbroker.cluster.member``.

    python -m kbroker.cluster.member --zookeeper-connect 127.0.0.1:2181/kbroker \\
        --broker-id 1 --host 127.0.0.1 --port 9093 [--rack r1] [--session-timeout-ms 6000] \\
        -- serve --set log.dirs=/data/1 ...

The process *is* the broker (``kbroker serve`` runs in it, same PID), with cluster membership
added from outside the server while ``zookeeper.connect`` is still refused by the broker's config
(cluster mode is not finished). What it does in ZooKeeper, through ``kbroker.metadata.zk_*``:

- takes the cluster id from ``/cluster/id`` (creating it on a fresh ZooKeeper) and hands it to
  the broker as ``cluster.id``, so every broker reports the same cluster id;
- once the broker's port accepts connections, registers ``/brokers/ids/N`` (ephemeral; again
  after a lost session) and competes for ``/controller``, bumping ``/controller_epoch``.

What it does not do yet: topics stay in each broker's own data dir (the controller does not
write them to ZooKeeper yet), and nothing is replicated. A clean shutdown closes the session, so
the broker's znodes go at once; a killed broker's go after the session timeout.
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys
import threading
import time

log = logging.getLogger("kbroker.cluster")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m kbroker.cluster.member")
    p.add_argument("--zookeeper-connect", required=True)
    p.add_argument("--broker-id", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--rack")
    p.add_argument("--session-timeout-ms", type=int, default=18000)
    p.add_argument("--connection-timeout-ms", type=int)
    p.add_argument("serve_args", nargs=argparse.REMAINDER,
                   help="after --: the `kbroker serve` arguments")
    return p


def _wait_for_port(host: str, port: int, stop: threading.Event) -> bool:
    while not stop.is_set():
        try:
            socket.create_connection((host, port), timeout=1).close()
            return True
        except OSError:
            stop.wait(0.1)
    return False


def main(argv: list[str] | None = None) -> int:
    from kbroker.cli import main as cli
    from kbroker.metadata import zk_client, zk_znodes
    from kbroker.metadata.zk_election import ControllerElection
    from kbroker.metadata.zk_registration import BrokerRegistration
    from kbroker.metadata.zk_store import ZkMetadataStore

    args = _parser().parse_args(argv)
    serve_args = [a for a in args.serve_args if a != "--"] or ["serve"]
    cli.setup_logging("INFO")
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    try:
        client = zk_client.connect(args.zookeeper_connect, args.session_timeout_ms,
                                   args.connection_timeout_ms)
    except Exception as exc:
        print(f"kbroker: cannot reach ZooKeeper at {args.zookeeper_connect}: "
              f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 3
    store = ZkMetadataStore(client, args.broker_id)
    endpoints = [zk_znodes.Endpoint("PLAINTEXT", args.host, args.port)]
    registration = BrokerRegistration(client, args.broker_id, endpoints, args.rack)
    election = ControllerElection(client, args.broker_id, store)
    stop = threading.Event()

    def join_when_serving() -> None:
        if _wait_for_port(args.host, args.port, stop):
            try:
                registration.register()
                election.start()
            except Exception as exc:  # e.g. BrokerIdInUse: stop the broker, say why
                log.error("joining the cluster failed: %s", exc)
                import os
                import signal
                os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=join_when_serving, name="zk-join", daemon=True).start()
    try:
        return cli.main(serve_args + ["--set", f"cluster.id={store.cluster_id}",
                                      "--set", f"broker.id={args.broker_id}"])
    finally:
        stop.set()
        election.stop()
        registration.close()
        client.stop()  # closes the session: our ephemeral znodes go now
        client.close()


if __name__ == "__main__":
    time.tzset()
    sys.exit(main())
