"""The rpk-style CLI as a user runs it (``python -m kbroker ...``), against kbroker and against
Apache Kafka 4.4.0 (tools/kafka_ref)."""

from __future__ import annotations

import json
import subprocess

import pytest

from kbroker.testing import KafkaBroker
from tests.cli.command import run_kbroker


def cli(brokers: str, *args, stdin: str | None = None, expect: int = 0) -> str:
    result = run_kbroker(*args, "-X", f"brokers={brokers}", stdin=stdin)
    assert result.returncode == expect, (args, result.stdout, result.stderr)
    return result.stdout if expect == 0 else result.stdout + result.stderr


@pytest.fixture(scope="module")
def kbroker():
    with KafkaBroker() as kafka:
        yield kafka.bootstrap_servers


def rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.strip().splitlines()]


def test_topic_lifecycle(kbroker):
    assert rows(cli(kbroker, "topic", "create", "orders", "-p", "3", "-r", "1",
                    "-c", "retention.ms=3600000")) == [["TOPIC", "STATUS"], ["orders", "OK"]]
    out = cli(kbroker, "topic", "create", "orders", expect=1)
    assert "TOPIC_ALREADY_EXISTS" in out
    assert ["orders", "3", "1"] in rows(cli(kbroker, "topic", "list"))
    described = cli(kbroker, "topic", "describe", "orders")
    assert ["retention.ms", "3600000", "DYNAMIC_TOPIC_CONFIG"] in rows(described)
    cli(kbroker, "topic", "alter-config", "orders", "--set", "retention.ms=60000")
    assert ["retention.ms", "60000", "DYNAMIC_TOPIC_CONFIG"] in rows(
        cli(kbroker, "topic", "describe", "orders"))
    cli(kbroker, "topic", "add-partitions", "orders", "-n", "2")
    assert ["orders", "5", "1"] in rows(cli(kbroker, "topic", "list"))
    cli(kbroker, "topic", "delete", "orders")
    assert "orders" not in cli(kbroker, "topic", "list")


def test_unknown_topic_config_names_the_closest(kbroker):
    out = cli(kbroker, "topic", "create", "typo", "-c", "retention.msx=1", expect=1)
    assert "INVALID_CONFIG" in out and "(did you mean 'retention.ms'?)" in out


def test_produce_consume_and_group_lag(kbroker):
    cli(kbroker, "topic", "create", "events", "-p", "2")
    produced = cli(kbroker, "topic", "produce", "events", "-k", "user1", "-H", "src:cli", "-p", "1",
                   "-z", "gzip", stdin="a\nb\nc\n")
    assert produced.count("Produced to partition 1 at offset") == 3
    formatted = cli(kbroker, "topic", "consume", "events", "-o", "start:end",
                    "-f", "%p/%o %k=%v %h\\n")
    assert formatted.splitlines() == ["1/0 user1=a src=cli", "1/1 user1=b src=cli",
                                      "1/2 user1=c src=cli"]
    [first] = [json.loads(line) for line in
               cli(kbroker, "topic", "consume", "events", "-o", "1", "-p", "1", "-n", "1").splitlines()]
    assert (first["value"], first["offset"], first["headers"]) == ("b", 1, [{"key": "src", "value": "cli"}])
    cli(kbroker, "topic", "consume", "events", "-o", "start", "-g", "readers", "-n", "2")
    assert ["readers", "Empty", "consumer"] in rows(cli(kbroker, "group", "list"))
    described = rows(cli(kbroker, "group", "describe", "readers"))
    assert ["readers", "Empty", "0", "1"] in described  # BALANCER is empty: no members
    assert ["events", "1", "2", "0", "3", "1"] in described
    cli(kbroker, "group", "seek", "readers", "--to", "start")
    assert ["events", "1", "0", "0", "3", "3"] in rows(cli(kbroker, "group", "describe", "readers"))
    cli(kbroker, "group", "delete", "readers")
    assert "readers" not in cli(kbroker, "group", "list")


def test_cluster_info_and_config(kbroker):
    info = cli(kbroker, "cluster", "info")
    port = kbroker.rsplit(":", 1)[1]
    assert ["1*", "127.0.0.1", port] in rows(info)
    cli(kbroker, "cluster", "config", "set", "log.cleaner.backoff.ms", "700")
    assert cli(kbroker, "cluster", "config", "get", "log.cleaner.backoff.ms").strip() == "700"
    out = cli(kbroker, "cluster", "config", "get", "log.cleaner.backof.ms", expect=1)
    assert out.strip() == "kbroker: unknown broker config 'log.cleaner.backof.ms' " \
                          "(did you mean 'log.cleaner.backoff.ms'?)"


def test_usage_errors_are_one_line_with_the_closest_name(kbroker):
    out = cli(kbroker, "topic", "craete", "x", expect=2)
    assert out.strip().splitlines()[0].startswith(
        "kbroker topic: error: unknown command 'craete' (did you mean 'create'?)")
    out = cli(kbroker, "topic", "create", "x", "--partitons", "3", expect=2)
    assert out.strip() == "kbroker topic create: error: unknown flag '--partitons' (did you mean '--partitions'?)"
    result = run_kbroker("topic", "list", "-X", "brokerz=x")
    assert (result.returncode, result.stderr.strip()) == \
        (2, "kbroker: -X: unknown option 'brokerz' (did you mean 'brokers'?)")


def test_completion_scripts_know_the_commands():
    result = run_kbroker("completion", "bash")
    assert '["topic create"]=' in result.stdout and "--partitions" in result.stdout
    check = subprocess.run(["bash", "-c", result.stdout + "\nCOMP_WORDS=(kbroker topic cr); COMP_CWORD=2;"
                            " _kbroker; echo ${COMPREPLY[@]}"], capture_output=True, text=True)
    assert check.stdout.split() == ["create"], check.stderr


def test_against_apache_kafka(reference_kafka):
    # the session's Kafka (tests/shared_kafka.py): no other module uses the topic "ref" or group "g"
    brokers = reference_kafka.get({"num.partitions": "1"}).bootstrap
    assert rows(cli(brokers, "topic", "create", "ref", "-p", "2")) == [["TOPIC", "STATUS"], ["ref", "OK"]]
    cli(brokers, "topic", "produce", "ref", "-k", "k", "-p", "0", stdin="x\ny\n")
    assert cli(brokers, "topic", "consume", "ref", "-o", "start:end", "-f", "%k=%v\\n").split() == \
        ["k=x", "k=y"]
    cli(brokers, "topic", "consume", "ref", "-o", "start", "-g", "g", "-n", "1")
    assert ["ref", "0", "1", "0", "2", "1"] in rows(cli(brokers, "group", "describe", "g"))
    assert "CLUSTER" in cli(brokers, "cluster", "info")
    assert cli(brokers, "cluster", "config", "get", "num.partitions").strip() == "1"
