"""``kbroker group list|describe|seek|delete``: consumer groups and their lag per partition."""

from __future__ import annotations

from kbroker.cli.commands.common import CommandError, admin, group_parser, leaf, table


def register(sub, shared) -> None:
    _, group = group_parser(sub, "group", "list, describe (with lag), seek and delete consumer groups")
    p = leaf(group, "list", shared, "list groups", aliases=["ls"], examples="kbroker group list")
    p.set_defaults(run=list_groups)

    p = leaf(group, "describe", shared, "members, committed offsets and lag per partition",
             examples="kbroker group describe my-group")
    p.add_argument("groups", nargs="+", metavar="GROUP")
    p.set_defaults(run=describe)

    p = leaf(group, "seek", shared, "move a group's committed offsets (the group must be empty)",
             examples="""
kbroker group seek my-group --to start
kbroker group seek my-group --to end --topics orders
kbroker group seek my-group --to 42 --topics orders
kbroker group seek my-group --to -100                # 100 before the end of each partition
kbroker group seek my-group --to @-1h                # where the records of an hour ago begin
kbroker group seek my-group --to 1700000000          # bare unix s/ms (9+ digits): as rpk, a time""")
    p.add_argument("group", metavar="GROUP")
    p.add_argument("--to", required=True,
                   help="start, end, N, +N (after start), -N (before end), @T (a timestamp or "
                        "duration, as in topic consume -o); a bare number of 9+ digits is a unix "
                        "time in s or ms, as rpk reads it")
    p.add_argument("--topics", type=lambda s: s.split(","),
                   help="comma-separated topics (default: those the group committed to)")
    p.set_defaults(run=seek)

    p = leaf(group, "delete", shared, "delete groups (they must be empty)",
             examples="kbroker group delete my-group")
    p.add_argument("groups", nargs="+", metavar="GROUP")
    p.set_defaults(run=delete)


def list_groups(args) -> int:
    groups = sorted(admin(args).list_groups(), key=lambda g: g["group_id"])
    print(table(["GROUP", "STATE", "PROTOCOL-TYPE"],
                [[g["group_id"], g.get("group_state") or "", g.get("protocol_type") or ""] for g in groups]))
    return 0


def describe(args) -> int:
    from kbroker.admin_client import group_lag

    client = admin(args)
    described = client.describe_groups(args.groups)
    for name in args.groups:
        info = described.get(name, {})
        owners = {}
        for member in info.get("members", []):
            for assigned in (member.get("member_assignment") or {}).get("assigned_partitions", []):
                for partition in assigned["partitions"]:
                    owners[(assigned["topic"], partition)] = member
        lags = group_lag(client, name, sorted({t for t, _ in owners}))
        print(table(["GROUP", "STATE", "BALANCER", "MEMBERS", "TOTAL-LAG"],
                    [[name, info.get("group_state") or "Dead", info.get("protocol_data") or "",
                      len(info.get("members", [])), sum(p.lag for p in lags)]]))
        print()
        rows = []
        for p in lags:
            member = owners.get((p.topic, p.partition), {})
            rows.append([p.topic, p.partition, "-" if p.committed is None else p.committed,
                         p.log_start, p.log_end, p.lag, member.get("member_id", ""),
                         member.get("client_id", ""), member.get("client_host", "")])
        print(table(["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-START-OFFSET", "LOG-END-OFFSET",
                     "LAG", "MEMBER-ID", "CLIENT-ID", "HOST"], rows))
        print()
    return 0


def seek(args) -> int:
    from kafka import OffsetAndMetadata, TopicPartition

    from kbroker.cli.commands import offsets
    from kbroker.admin_client import group_lag, partitions_of

    to = "@" + args.to if args.to.isdigit() and len(args.to) >= 9 else args.to
    try:
        wanted = offsets.parse(to)
    except offsets.OffsetError as exc:
        raise CommandError(f"--to {exc}", 2) from None
    if wanted.stop is not None:
        raise CommandError(f"--to {args.to}: one position, not a range", 2)
    client = admin(args)
    if args.topics:
        partitions = partitions_of(client, args.topics)
    else:
        partitions = [(p.topic, p.partition) for p in group_lag(client, args.group)]
        if not partitions:
            raise CommandError(f"group {args.group} has no committed offsets: name --topics")
    targets = _targets(client, partitions, wanted.begin)
    errors = client.alter_group_offsets(
        args.group, {TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in targets.items()})
    rows, failed = [], 0
    for (topic, partition), offset in sorted(targets.items()):
        error = errors.get(TopicPartition(topic, partition))
        ok = error is None or getattr(error, "errno", 0) == 0
        failed |= not ok
        rows.append([topic, partition, offset, "OK" if ok else getattr(error, "message", str(error))])
    print(table(["TOPIC", "PARTITION", "NEW-OFFSET", "STATUS"], rows))
    return 1 if failed else 0


def _targets(client, partitions, position) -> dict:
    from kafka import TopicPartition

    from kbroker.cli.commands import offsets
    from kbroker.admin_client import log_offsets

    def by_time(ms: int) -> dict:
        found = client.list_partition_offsets({TopicPartition(t, p): ms for t, p in partitions})
        return {(tp.topic, tp.partition): o.offset if o.offset >= 0 else None
                for tp, o in found.items()}

    bounds = log_offsets(client, partitions)
    targets = offsets.resolve(position, bounds, by_time)
    # an exact offset outside the log is clamped, as kafka-consumer-groups.sh --to-offset does
    return {tp: min(max(o, bounds[tp][0]), bounds[tp][1]) for tp, o in targets.items()}


def delete(args) -> int:
    results = admin(args).delete_groups(args.groups)
    rows = [[name, str(results.get(name, "no answer"))] for name in args.groups]
    print(table(["GROUP", "STATUS"], rows))
    return 0 if all(status == "OK" for _, status in rows) else 1
