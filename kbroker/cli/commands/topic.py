"""``kbroker topic create|list|describe|delete|alter-config|add-partitions``; produce and consume
live in :mod:`kbroker.cli.commands.produce` and :mod:`kbroker.cli.commands.consume`."""

from __future__ import annotations

import re

from kbroker.cli.commands import consume, produce
from kbroker.cli.commands.common import (CommandError, admin, error_name, group_parser, key_values,
                                         leaf, table)


def register(sub, shared) -> None:
    _, topic = group_parser(sub, "topic", "create, list, describe, delete, alter topics; produce and consume")
    p = leaf(topic, "create", shared, "create topics", examples="""
kbroker topic create orders -p 3 -r 1
kbroker topic create events -c cleanup.policy=compact -c retention.ms=-1""")
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    p.add_argument("-p", "--partitions", type=int, default=-1,
                   help="number of partitions (default: the broker's num.partitions)")
    p.add_argument("-r", "--replicas", type=int, default=-1,
                   help="replication factor (default: the broker's default.replication.factor)")
    p.add_argument("-c", "--topic-config", action="append", default=[], metavar="KEY=VALUE",
                   help="topic config; repeatable")
    p.add_argument("-d", "--dry", action="store_true", help="validate only")
    p.set_defaults(run=create)

    p = leaf(topic, "list", shared, "list topics", aliases=["ls"], examples="""
kbroker topic list
kbroker topic list -i        # with internal topics""")
    p.add_argument("-i", "--internal", action="store_true", help="include internal topics")
    p.add_argument("-d", "--detailed", action="store_true", help="one row per partition")
    p.set_defaults(run=list_topics)

    p = leaf(topic, "describe", shared, "summary, configs and partitions of topics",
             examples="kbroker topic describe orders")
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    p.add_argument("-a", "--print-all", action="store_true", help="all configs, defaults included")
    p.set_defaults(run=describe)

    p = leaf(topic, "delete", shared, "delete topics", examples="kbroker topic delete orders events")
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    p.set_defaults(run=delete)

    p = leaf(topic, "alter-config", shared, "set or delete topic configs (incremental)",
             examples="kbroker topic alter-config orders --set retention.ms=60000 --delete cleanup.policy")
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    p.add_argument("-s", "--set", dest="set_configs", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("-d", "--delete", dest="delete_configs", action="append", default=[], metavar="KEY")
    p.set_defaults(run=alter_config)

    p = leaf(topic, "add-partitions", shared, "add partitions to topics",
             examples="kbroker topic add-partitions orders -n 2")
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    p.add_argument("-n", "--num", type=int, required=True, help="partitions to add")
    p.set_defaults(run=add_partitions)

    produce.register(topic, shared)
    consume.register(topic, shared)


def _status_table(results: list[tuple[str, str | None]]) -> int:
    """Print TOPIC/STATUS rows (name, error or None); exit 1 if any failed, as rpk does."""
    print(table(["TOPIC", "STATUS"], [[name, error or "OK"] for name, error in results]))
    return 1 if any(error for _, error in results) else 0


def _error(code: int, message: str | None, config_keys=()) -> str | None:
    if code == 0:
        return None
    return _with_hint(f"{error_name(code)}: {message}" if message else error_name(code), config_keys)


def _with_hint(error: str, config_keys) -> str:
    """A broker refusing an unknown topic config: name the closest one kbroker knows (a hint
    only: another broker may know other configs)."""
    from kbroker.suggest import did_you_mean
    from kbroker.config import TOPIC_CONFIGS

    unknown = [key for key in config_keys if key not in TOPIC_CONFIGS and key in error]
    return error + (did_you_mean(unknown[0], TOPIC_CONFIGS) if unknown else "")


def create(args) -> int:
    configs = key_values(args.topic_config, "-c")
    client = admin(args)
    result = client.create_topics(
        {name: {"num_partitions": args.partitions, "replication_factor": args.replicas,
                "configs": configs} for name in args.topics},
        validate_only=args.dry, raise_errors=False)
    return _status_table([(t["name"], _error(t["error_code"], t.get("error_message"), configs))
                          for t in result["topics"]])


def list_topics(args) -> int:
    topics = sorted(admin(args).describe_topics(), key=lambda t: t["name"])
    if not args.internal:
        topics = [t for t in topics if not t["is_internal"]]
    if args.detailed:
        rows = [[t["name"], p["partition_index"], p["leader_id"], p["leader_epoch"],
                 ",".join(map(str, p["replica_nodes"]))] for t in topics for p in t["partitions"]]
        print(table(["NAME", "PARTITION", "LEADER", "EPOCH", "REPLICAS"], rows))
    else:
        rows = [[t["name"], len(t["partitions"]),
                 len(t["partitions"][0]["replica_nodes"]) if t["partitions"] else 0] for t in topics]
        print(table(["NAME", "PARTITIONS", "REPLICAS"], rows))
    return 0


def describe(args) -> int:
    from kafka.admin import ConfigResource, ConfigResourceType

    from kbroker.admin_client import log_offsets

    client = admin(args)
    failed = 0
    for topic in client.describe_topics(args.topics):
        name = topic["name"]
        if topic["error_code"]:
            print(f"{name}: {error_name(topic['error_code'])}")
            failed = 1
            continue
        partitions = sorted(topic["partitions"], key=lambda p: p["partition_index"])
        print("SUMMARY\n=======")
        print(table(["NAME", "INTERNAL", "PARTITIONS", "REPLICAS"],
                    [[name, str(topic["is_internal"]).lower(), len(partitions),
                      len(partitions[0]["replica_nodes"]) if partitions else 0]]))
        configs = client.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)],
                                          config_filter="all" if args.print_all else "modified")
        entries = configs.get("topic", {}).get(name, {})
        print("\nCONFIGS\n=======")
        print(table(["KEY", "VALUE", "SOURCE"],
                    [[key, e.get("value"), _source(e.get("config_source"))]
                     for key, e in sorted(entries.items())]))
        offsets = log_offsets(client, [(name, p["partition_index"]) for p in partitions])
        print("\nPARTITIONS\n==========")
        print(table(["PARTITION", "LEADER", "EPOCH", "REPLICAS", "LOG-START-OFFSET", "HIGH-WATERMARK"],
                    [[p["partition_index"], p["leader_id"], p["leader_epoch"],
                      ",".join(map(str, p["replica_nodes"])), *offsets[(name, p["partition_index"])]]
                     for p in partitions]))
        print()
    return failed


def _source(code) -> str:
    from kafka.admin._configs import ConfigSourceType

    try:
        return ConfigSourceType(code).name
    except (ValueError, TypeError):
        return str(code)


def delete(args) -> int:
    result = admin(args).delete_topics(args.topics, raise_errors=False)
    return _status_table([(t["name"], _error(t["error_code"], t.get("error_message")))
                          for t in result["topics"]])


def alter_config(args) -> int:
    from kafka.admin import ConfigResource, ConfigResourceType
    from kafka.admin._configs import AlterConfigOp

    changes = {key: (AlterConfigOp.SET, value)
               for key, value in key_values(args.set_configs, "--set").items()}
    changes.update({key: (AlterConfigOp.DELETE, None) for key in args.delete_configs})
    if not changes:
        raise CommandError("topic alter-config: nothing to do: give --set KEY=VALUE or --delete KEY", 2)
    result = admin(args).alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, name, dict(changes)) for name in args.topics],
        raise_on_unknown=False, incremental=True)
    return _status_table([(name, alter_error(result, "topic", name, changes)) for name in args.topics])


def alter_error(result, resource_type: str, name: str, keys=()) -> str | None:
    """kafka-python reports each resource as 'OK' or '[Error N] ErrorClass: message'."""
    outcome = str(result.get(resource_type, {}).get(name, "no answer"))
    if outcome == "OK":
        return None
    return _with_hint(re.sub(r"^\[Error -?\d+\] ", "", outcome), keys)


def add_partitions(args) -> int:
    client = admin(args)
    current = {t["name"]: len(t["partitions"]) for t in client.describe_topics(args.topics)}
    response = client.create_partitions(
        {name: current.get(name, 0) + args.num for name in args.topics}, raise_errors=False)
    return _status_table([(r.name, _error(r.error_code, r.error_message)) for r in response.results])
