"""``kbroker cluster info``, ``kbroker cluster config get|set`` (dynamic broker configs), and
``kbroker cluster up`` (a local ZooKeeper cluster: :mod:`kbroker.cli.cluster_up`)."""

from __future__ import annotations

from kbroker.cli.commands.common import admin, group_parser, leaf, table


def register(sub, shared) -> None:
    cluster_parser, cluster = group_parser(sub, "cluster", "cluster metadata and broker configs")
    p = leaf(cluster, "info", shared, "cluster id, controller, brokers and topics", aliases=["metadata"],
             examples="kbroker cluster info\nkbroker cluster info -X brokers=kafka:9092")
    p.set_defaults(run=info)

    _, config = group_parser(cluster, "config", "get or set broker configs")
    p = leaf(config, "get", shared, "a broker config's value",
             examples="kbroker cluster config get log.retention.ms")
    p.add_argument("key", metavar="KEY")
    p.add_argument("--node", help="broker id (default: the controller)")
    p.set_defaults(run=config_get)
    p = leaf(config, "set", shared, "set a dynamic broker config on every broker (or one --node)",
             examples="kbroker cluster config set log.retention.ms 60000\n"
                      "kbroker cluster config set log.cleaner.backoff.ms 500 --node 1")
    p.add_argument("key", metavar="KEY")
    p.add_argument("value", metavar="VALUE", help="the value; an empty string deletes the override")
    p.add_argument("--node", help="broker id (default: every broker)")
    p.set_defaults(run=config_set)

    from kbroker.cli import cluster_up
    cluster_up.register(cluster)


def info(args) -> int:
    client = admin(args)
    cluster = client.describe_cluster()
    print("CLUSTER\n=======")
    print(f"{cluster['cluster_id']}\n")
    print("BROKERS\n=======")
    print(table(["ID", "HOST", "PORT", "RACK"],
                [[f"{b['broker_id']}{'*' if b['broker_id'] == cluster['controller_id'] else ''}",
                  b["host"], b["port"], b.get("rack") or ""] for b in cluster["brokers"]]))
    topics = sorted(client.describe_topics(), key=lambda t: t["name"])
    print("\nTOPICS\n======")
    print(table(["NAME", "PARTITIONS", "REPLICAS"],
                [[t["name"], len(t["partitions"]),
                  len(t["partitions"][0]["replica_nodes"]) if t["partitions"] else 0] for t in topics]))
    return 0


def config_get(args) -> int:
    from kafka.admin import ConfigResource, ConfigResourceType

    from kbroker.cli.commands.common import CommandError
    from kbroker.suggest import did_you_mean

    client = admin(args)
    node = args.node or str(client.describe_cluster()["controller_id"])
    found = client.describe_configs([ConfigResource(ConfigResourceType.BROKER, node)],
                                    config_filter="all")
    entries = found.get("broker", {}).get(node, {})
    if args.key not in entries:
        raise CommandError(f"unknown broker config '{args.key}'{did_you_mean(args.key, entries)}")
    value = entries[args.key].get("value")
    print("" if value is None else value)
    return 0


def config_set(args) -> int:
    from kafka.admin import ConfigResource, ConfigResourceType
    from kafka.admin._configs import AlterConfigOp

    from kbroker.cli.commands.topic import alter_error

    change = (AlterConfigOp.DELETE, None) if args.value == "" else (AlterConfigOp.SET, args.value)
    client = admin(args)
    # Per broker: kafka-python cannot address Kafka's cluster-wide default resource ("").
    nodes = [args.node] if args.node else [str(b["broker_id"]) for b in client.describe_cluster()["brokers"]]
    result = client.alter_configs(
        [ConfigResource(ConfigResourceType.BROKER, node, {args.key: change}) for node in nodes],
        raise_on_unknown=False, incremental=True)
    error = next(filter(None, (alter_error(result, "broker", node) for node in nodes)), None)
    if error:
        from kbroker.cli.commands.common import CommandError
        from kbroker.suggest import did_you_mean
        from kbroker.config import BROKER_CONFIGS

        hint = did_you_mean(args.key, BROKER_CONFIGS) if args.key not in BROKER_CONFIGS else ""
        raise CommandError(f"cluster config set {args.key}: {error}{hint}")
    print(f"Successfully updated configuration {args.key}.")
    return 0
