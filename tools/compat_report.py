#!/usr/bin/env python3
"""Render the compatibility matrix (``COMPATIBILITY.md``) from a run's results.

The compat test session (``compat_tests/conftest.py``) collects one result per (scenario, client)
cell and calls :func:`render`; it also leaves the raw results in ``build/compat/results.json``, so
``python tools/compat_report.py build/compat/results.json > COMPATIBILITY.md`` re-renders them.
"""

from __future__ import annotations

import json
import sys

SYMBOL = {"pass": "✅", "fail": "❌", "n/a": "➖", "gap": "🚧", "pending": "⏳",
          "skipped": "⏭"}
CROSS = "cross-client"

SCENARIOS = {
    "produce-consume": "one client produces 12 records (keys, a null key every 3rd, two headers, "
                       "explicit timestamps where the client can set them) to a 3-partition "
                       "topic and consumes them back; every field checked exactly, per-partition "
                       "order preserved, acknowledged offsets match",
    CROSS: "every producer x every consumer, per codec: 6 records on a 1-partition topic, checked "
           "exactly (key, null key, headers, timestamp); the batches on disk must carry the codec",
    "auto-create on": "produce to a topic that does not exist; the broker creates it; consume "
                      "it back",
    "auto-create off": "the same against a broker with auto.create.topics.enable=false: the "
                       "producer must fail and the topic must not appear; the error the client "
                       "reports is recorded in the notes",
    "admin.create-topic": "create a 3-partition topic with a config override (checked through "
                          "Metadata and DescribeConfigs)",
    "admin.delete-topic": "delete a topic (checked through Metadata)",
    "admin.create-partitions": "grow a topic from 1 to 3 partitions",
    "admin.describe-configs": "read a topic's override and a default",
    "admin.alter-configs": "set a topic config (checked through DescribeConfigs)",
    "admin.list-offsets": "earliest, latest and by-timestamp offsets of 2 partitions, one with "
                          "records deleted",
    "admin.delete-records": "delete records below an offset (checked through ListOffsets)",
    "admin.move-log-dir": "move a replica to the broker's other log dir (AlterReplicaLogDirs; "
                          "checked through DescribeLogDirs)",
    "idempotent producer": "20 records with enable.idempotence: on disk, one producer id and "
                           "gap-free sequences; exactly 20 records",
    "large message": "two 900 KiB records (default message.max.bytes, 1 MiB) produced and "
                     "consumed back intact",
    "groups: commit and resume": "a group member consumes part of a topic and commits; a "
                                 "restarted member resumes at the committed offsets (nothing "
                                 "lost, nothing repeated)",
    "groups: rebalance": "a second member joins (partitions are shared) and leaves (the first "
                         "gets them back); every record is consumed",
    "share groups: three consumers share one partition, each record once":
        "three members of one share group (KIP-932) read one partition while records arrive; "
        "each accepting implicitly (the next poll accepts): every record is delivered, none "
        "twice, to more than one member",
    "share groups: RELEASE redelivers, REJECT archives":
        "a member releases every record (explicit acknowledgement): the next gets them again "
        "with a higher delivery count and rejects them; a third gets nothing",
    "share groups: a killed consumer's locked records go to another after the lock expires":
        "a member holding acquired records unacknowledged is frozen (SIGSTOP, its connection "
        "open); another member gets every one of them once the lock (2 s) expires, with a "
        "higher delivery count; then the holder is killed (SIGKILL)",
    "share groups: REJECT writes the group's dead-letter queue (KIP-1191)":
        "the group's errors.deadletterqueue.topic.name names a topic created with "
        "errors.deadletterqueue.group.enable=true, copy.record.enable on; a member rejects every "
        "record: each is in the DLQ once, with its value and Kafka 4.4's six __dlq.errors.* "
        "headers, and none comes back",
    "schema-registry: avro": "the client's schema-registry serializers against kbroker's own "
                             "registry: Avro values (a long past 32 bits, non-ASCII text, an "
                             "array, a nullable union) registered under <topic>-value as v1, "
                             "then a compatible v2 (a field added with a default), produced in "
                             "Confluent's wire format to 2 partitions; read back and decoded "
                             "with the schema fetched by id: keys, values and ids exact; a "
                             "schema changing a field's type is refused with 409 and the "
                             "subject keeps versions [1, 2]",
    "schema-registry: json schema": "the same with JSON Schema (draft-07, a closed content "
                                    "model; v2 adds an optional property with a default, the "
                                    "refused one changes a property's type): the values travel "
                                    "as JSON text after the 5-byte header",
    "schema-registry: protobuf": "the same with a .proto schema (v2 adds a field, the refused "
                                 "one changes a field's scalar kind): each value is the "
                                 "message indexes ([0]: one zero byte) and the message after "
                                 "the 5-byte header, checked on the raw records; values "
                                 "compared in Protobuf's JSON mapping",
    **{f"schema-registry: {name}, cross-client":
       f"every producer x every consumer of the schema-registry: {name} cells: one client "
       f"writes v1 and v2 records as there (checked raw: Confluent's wire format), another "
       f"decodes them with the schemas it fetches by id; values and ids exact"
       for name in ("avro", "json schema", "protobuf")},
    "consumer protocol: join and consume": "a member with group.protocol=consumer (KIP-848: "
                                           "ConsumerGroupHeartbeat, the broker assigns) joins "
                                           "and reads every record",
    "consumer protocol: commit and resume": "as groups: commit and resume, on the KIP-848 "
                                            "protocol (OffsetCommit with the member epoch)",
    "consumer protocol: three-member rebalance": "three members join one after another while "
                                                 "records keep coming; partitions move "
                                                 "incrementally to a Stable 2/2/2 split, no "
                                                 "partition ever has two owners (checked with "
                                                 "ConsumerGroupDescribe) and no record is missed",
    "consumer protocol: migration of a running classic group": "a classic member consumes; a "
        "group.protocol=consumer member joins the running group (online upgrade, the classic "
        "member served by the coordinator), then the classic member restarts on the consumer "
        "protocol; no record is missed",
    "transactions": "a transactional producer aborts one transaction and commits the next "
                    "(transaction.version finalized at 2, as Kafka 4.x: the Java producer uses "
                    "transactions v2, the others v1); read_committed sees only the committed "
                    "records, read_uncommitted both, in log order",
    "client telemetry (KIP-714)": "a client-metrics subscription (every metric, every 200 ms) "
                                  "matches the client's id; a consumer waiting for records "
                                  "pushes its metrics: the broker accepts the pushes and exports "
                                  "the metrics on /metrics with the client's id",
    "connect: FileStream source (exactly-once) and sink, 2 workers, restarts, kill -9":
        "Kafka Connect in distributed mode, two workers, driven through its REST API: a "
        "FileStream source with exactly.once.support=required (KIP-618) and a FileStream sink; "
        "a connector restart (includeTasks), a task restart and a kill -9 of the worker running "
        "the source task; the sink file gets every line, the topic read_committed has each line "
        "exactly once, in order",
    "connect: a non-compacted config topic refused as by Kafka 4.4.0":
        "a worker whose config.storage.topic has cleanup.policy=delete: the worker refuses it "
        "with the same ConfigException line against kbroker and Apache Kafka 4.4.0",
    "debezium postgres: change events exactly once across a worker kill -9":
        "Debezium's PostgreSQL connector (pgoutput, PostgreSQL from Debian with "
        "wal_level=logical), exactly-once source delivery: 50 rows snapshotted, 50 streamed, "
        "the worker killed -9, 50 inserted while it is down, 50 after it is back; "
        "read_committed, one event per row, in commit order",
    "mirrormaker 2: Kafka 4.4.0 <-> kbroker, configs, offsets, failover":
        "MirrorMaker 2 (dedicated mode) from Apache Kafka 4.4.0 to kbroker and from kbroker to "
        "Kafka at once: each side's topic (2 partitions, its own retention.ms) is mirrored with "
        "its config; a group that consumed 60 of 100 records gets translated offsets on the "
        "other cluster (never ahead of its own), and resumes there with nothing lost",
    "quix streams: exactly-once count with state, broker kill -9, restore":
        "a Quix Streams application (processing_guarantee=exactly-once, RocksDB state with its "
        "changelog topic) counts 600 records of 10 keys in three rounds: the broker killed -9 "
        "and restarted under it, then the application killed -9 and started with its state "
        "directory gone (restored from the changelog); read_committed, each key's counts are "
        "exactly 1..60 in order",
    "faust: agent with a table, exactly-once, broker kill -9, restore":
        "the same three rounds with a Faust (faust-streaming) agent counting in a table "
        "(processing_guarantee=exactly_once, in-memory store rebuilt from its changelog topic at "
        "each start)",
    "flink: KafkaSink exactly-once, kill -9, restart from checkpoint":
        "a Flink job in a local mini-cluster (parallelism 2, checkpoints every 500 ms, retained) "
        "copies a 2-partition topic with Flink's Kafka source and KafkaSink at "
        "DeliveryGuarantee.EXACTLY_ONCE; killed -9 part-way, restarted from its latest "
        "checkpoint while more records arrive: read_committed, the output is the 1,000 input "
        "records, each exactly once",
    "kafka streams: exactly_once_v2 count": "a Kafka Streams app with processing.guarantee="
                                            "exactly_once_v2 counts records per key (record "
                                            "cache off, so one output record per input record) "
                                            "from a 2-partition topic to another; read_committed, "
                                            "each key's counts are exactly 1..n in order",
}


SECURITY = "security: "
# The security columns, in order (compat_tests/security.py's modes).
SECURITY_MODES = {
    "SSL": "TLS, the broker's CA trusted",
    "SASL_SSL PLAIN": "TLS + SASL PLAIN (users from the listener's JAAS entry)",
    "SASL_SSL SCRAM-SHA-512": "TLS + SCRAM-SHA-512 (a credential created through "
                              "AlterUserScramCredentials, as kafka-configs.sh does)",
    "mTLS": "TLS with a client certificate (ssl.client.auth=required), on a topic whose one "
            "ACL allows only the principal its subject maps to",
}

CLUSTER = "cluster: "
# The cluster columns, in order (compat_tests/test_cluster.py).
CLUSTER_SCENARIOS = {
    "produce acks=all idempotent, consume": "12 records from an idempotent acks=all producer to "
                                            "a 3-partition topic whose leaders are spread over "
                                            "the brokers, consumed back and checked exactly as "
                                            "in produce-consume",
    "groups: commit and resume": "as groups: commit and resume, the group coordinator being "
                                 "whichever broker leads the group's __consumer_offsets "
                                 "partition",
    "transactions": "as transactions (abort then commit; read_committed and read_uncommitted), "
                    "the transaction coordinator on the leader of the id's __transaction_state "
                    "partition",
    "consumer protocol, coordinator killed": "a group.protocol=consumer member consumes while "
                                             "the broker coordinating its group is killed "
                                             "(kill -9); the group's state moves with its "
                                             "__consumer_offsets partition and no record is "
                                             "missed",
}

CODEC_ORDER = ("none", "gzip", "snappy", "lz4", "zstd")


def scenario_order(name: str, described: dict | None = None) -> tuple:
    """The order of ``described`` (``SCENARIOS`` by default; then codec order for
    cross-client), unknown names last."""
    names = list(SCENARIOS if described is None else described)
    base = name.split(" (", 1)[0]
    codec = name.split("(", 1)[1].rstrip(")") if "(" in name else ""
    return (names.index(base) if base in names else len(names), base,
            CODEC_ORDER.index(codec) if codec in CODEC_ORDER else len(CODEC_ORDER), codec)


def cell_text(cell: dict | None) -> str:
    return SYMBOL.get(cell["status"], cell["status"]) if cell else " "


def esc(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def variant_table(prefix: str, known: dict, scenarios: set, drivers: list, by_key: dict,
                  heading: str, blurb: str) -> list[str]:
    """The lines of a client (row) × variant (column) table over the scenarios named
    ``prefix + variant``: the ``known`` variants in their documented order, then any others."""
    variants = [v for v in known if prefix + v in scenarios] + sorted(
        s.removeprefix(prefix) for s in scenarios if s.removeprefix(prefix) not in known)
    who = [d for d in drivers if any((prefix + v, d) in by_key for v in variants)]
    out = ["", heading, "", blurb, "",
           "| client | " + " | ".join(variants) + " |", "| --- |" + " :-: |" * len(variants)]
    for d in who:
        out.append(f"| {d} | " + " | ".join(cell_text(by_key.get((prefix + v, d)))
                                            for v in variants) + " |")
    return out


def render(results: dict) -> str:
    """The report; ``results["scenarios"]`` describes the scenarios of clients without a driver
    (Spark's, from its plugin), after the matrix's own."""
    described = {**SCENARIOS, **results.get("scenarios", {})}

    def order(name: str) -> tuple:
        return scenario_order(name, described)

    cells = results["cells"]
    drivers = results["drivers"]
    clients = results["clients"]
    out = ["# Compatibility matrix", ""]
    out.append(f"Generated {results['generated']} from kbroker commit `{results['commit']}` by "
               f"the compat suite (`make compat`, also part of `make test`); the run took "
               f"{results['minutes']} min. Do not edit by hand: it is rewritten by every full "
               f"run of `compat_tests/`.")
    out.append("")
    if not results.get("complete"):
        out += ["**Partial run** (a subset of clients, codecs or scenarios).", ""]
    counts = {}
    for c in cells:
        counts[c["status"]] = counts.get(c["status"], 0) + 1
    out.append("Legend: ✅ pass · ❌ fail · ➖ n/a (the client has no such feature) · 🚧 gap "
               "(the client has it, our driver does not drive it yet) · ⏳ pending (the broker "
               "does not implement it yet). Every cell that is not ✅ is listed with its reason "
               "under [Not passing](#not-passing).")
    out.append("")
    out.append("**Totals:** " + ", ".join(f"{SYMBOL.get(k, k)} {k} {v}"
                                          for k, v in sorted(counts.items())) + ".")
    out += ["", "## Clients", "", "| driver | client | version |", "| --- | --- | --- |"]
    for name in drivers:
        info = clients.get(name, {})
        version = info.get("version", "?")
        if info.get("details"):
            version += f" ({info['details']})"
        out.append(f"| {name} | {esc(info.get('client', ''))} | {esc(version)} |")

    singles = [c for c in cells if " → " not in c["client"]]
    by_key = {(c["scenario"], c["client"]): c for c in cells}
    clients_of: dict[str, set] = {}
    for c in singles:
        clients_of.setdefault(c["scenario"], set()).add(c["client"])
    # Scenarios every driver runs go in the grid; a client's own ones (Spark's) in a list.
    registered = set(results.get("registered", drivers))
    secured = {s for s in clients_of if s.startswith(SECURITY)}
    clustered = {s for s in clients_of if s.startswith(CLUSTER)}
    own = {s for s, who in clients_of.items() if len(who) == 1 and not who <= registered
           and s not in secured | clustered}
    shared = sorted((s for s in clients_of if s not in own | secured | clustered),
                    key=order)
    columns = [d for d in drivers if any(d in clients_of[s] for s in shared)] or drivers
    out += ["", "## Scenarios per client", "",
            "| scenario | " + " | ".join(columns) + " |",
            "| --- |" + " :-: |" * len(columns)]
    for s in shared:
        out.append(f"| {s} | " + " | ".join(cell_text(by_key.get((s, d))) for d in columns)
                   + " |")
    if own:
        out += ["", "### Client-specific scenarios", "", "| client | scenario | result |",
                "| --- | --- | :-: |"]
        for c in sorted((c for c in singles if c["scenario"] in own),
                        key=lambda c: (c["client"], order(c["scenario"]))):
            out.append(f"| {c['client']} | {c['scenario']} | {cell_text(c)} |")

    if secured:
        out += variant_table(
            SECURITY, SECURITY_MODES, secured, drivers, by_key,
            "## Security: client (row) × listener (column)",
            "Each cell: the client produces 6 records and consumes them back (checked "
            "exactly) on a listener that demands the mode. Certificates are made per run.")

    if clustered:
        out += variant_table(
            CLUSTER, CLUSTER_SCENARIOS, clustered, drivers, by_key,
            "## Cluster: client (row) × scenario (column)",
            "Three kbroker brokers (`kbroker cluster up`: a real ZooKeeper, one process per "
            "broker), topics at replication factor 3 with min.insync.replicas 2, internal "
            "topics at RF 3. The client is given all three addresses and finds leaders and "
            "coordinators from Metadata. Spark and Kafka Streams fill the columns their own way "
            "(each cell's note says how): Spark writes then reads a batch, resumes a streaming "
            "count from its checkpoint (it keeps no group offsets) and reads transactions "
            "read_committed (it writes none); Kafka Streams runs its exactly_once_v2 count.")

    cross = [c for c in cells if " → " in c["client"]]
    if cross:
        out += ["", "## Cross-client: producer (row) → consumer (column)", ""]
        for scenario in sorted(dict.fromkeys(c["scenario"] for c in cross), key=order):
            # only the clients paired in this scenario (a feature few have pairs only those)
            paired = {n for c in cross if c["scenario"] == scenario
                      for n in c["client"].split(" → ")}
            who = [d for d in columns if d in paired]
            out += [f"**{scenario}**", "", "| producer \\ consumer | " + " | ".join(who)
                    + " |", "| --- |" + " :-: |" * len(who)]
            for p in who:
                row = [cell_text(by_key.get((scenario, f"{p} → {c}"))) for c in who]
                out.append(f"| {p} | " + " | ".join(row) + " |")
            out.append("")

    bad = [c for c in cells if c["status"] != "pass"]
    out += ["", "## Not passing", ""]
    if bad:
        out += ["| scenario | client | status | reason |", "| --- | --- | --- | --- |"]
        for c in sorted(bad, key=lambda c: (c["status"], order(c["scenario"]),
                                            c["client"])):
            out.append(f"| {c['scenario']} | {c['client']} | {SYMBOL.get(c['status'], '')} "
                       f"{c['status']} | {esc(c['reason'])} |")
    else:
        out.append("Nothing: every cell passes.")

    noted = [c for c in cells if c.get("notes")]
    if noted:
        out += ["", "## Notes", "", "What the clients reported where the scenario records it "
                "(for instance the error a producer sees when auto-create is off).", "",
                "| scenario | client | note |", "| --- | --- | --- |"]
        for c in sorted(noted, key=lambda c: (order(c["scenario"]), c["client"])):
            out.append(f"| {c['scenario']} | {c['client']} | "
                       f"{esc('; '.join(c['notes']))} |")

    out += ["", "## Scenarios", ""]
    for name, text in described.items():
        out.append(f"- **{name}**: {text}.")
    for name, text in SECURITY_MODES.items():
        out.append(f"- **{SECURITY}{name}**: produce and consume over {text}.")
    for name, text in CLUSTER_SCENARIOS.items():
        out.append(f"- **{CLUSTER}{name}**: on the three-broker cluster, {text}.")
    out += ["", "Scenario code: `compat_tests/test_*.py`; drivers and what each client lacks: "
            "`compat_tests/drivers/registry.py`; the driver contract: `compat_tests/README.md`.",
            ""]
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: compat_report.py build/compat/results.json > COMPATIBILITY.md")
    with open(sys.argv[1]) as f:
        sys.stdout.write(render(json.load(f)))
