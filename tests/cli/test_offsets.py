"""rpk's offset language: ``topic consume -o`` and ``group seek --to`` against kbroker, and the
parser's readings and one-line refusals."""

from __future__ import annotations

import datetime
import subprocess

import pytest

from kbroker.cli.commands.offsets import OffsetError, Position, parse, timestamp
from kbroker.testing import KafkaBroker, KafkaHelpers
from tests.cli.command import run_kbroker

BASE_MS = 1_700_000_000_000  # record i has timestamp BASE_MS + i * 60 s


def kbroker(brokers: str, *args) -> subprocess.CompletedProcess:
    return run_kbroker(*args, "--brokers", brokers)


@pytest.fixture(scope="module")
def broker():
    from kafka import KafkaProducer

    with KafkaBroker() as kafka:
        helpers = KafkaHelpers(kafka.bootstrap_servers)
        helpers.create_topics("ten", configs={"retention.ms": "-1"})  # the timestamps are old
        helpers.close()
        producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers)
        for i in range(10):
            producer.send("ten", str(i).encode(), timestamp_ms=BASE_MS + i * 60_000)
        producer.flush()
        producer.close()
        yield kafka.bootstrap_servers


@pytest.mark.parametrize("offset,expected", [
    ("start:end", list(range(10))),
    (":end", list(range(10))),
    ("+3:end", list(range(3, 10))),
    ("-2:end", [8, 9]),
    ("3:5", [3, 4]),
    (":2", [0, 1]),
    ("7:end", [7, 8, 9]),
    (f"@{BASE_MS + 4 * 60_000}:end", list(range(4, 10))),
    (f"@{BASE_MS // 1000 + 60}:{BASE_MS + 3 * 60_000}", [1, 2]),
    (f"@{BASE_MS + 2 * 60_000}:2m", [2, 3]),  # a duration as T2 counts from T1
    ("@:" + str(BASE_MS + 2 * 60_000), [0, 1]),
])
def test_consume_offset_forms(broker, offset, expected):
    done = kbroker(broker, "topic", "consume", "ten", "-o", offset, "-f", "%o\\n")
    assert done.returncode == 0, done.stderr
    assert [int(line) for line in done.stdout.split()] == expected


def test_consume_defaults_to_start_as_rpk(broker):
    done = kbroker(broker, "topic", "consume", "ten", "-n", "1", "-f", "%v\\n")
    assert (done.returncode, done.stdout) == (0, "0\n"), done.stderr


def test_consume_relative_begin_without_end(broker):
    done = kbroker(broker, "topic", "consume", "ten", "-o", "-3", "-n", "3", "-f", "%o\\n")
    assert done.stdout.split() == ["7", "8", "9"], done.stderr


def test_group_seek_forms(broker):
    def committed() -> str:
        rows = [line.split() for line in kbroker(broker, "group", "describe", "g").stdout.splitlines()]
        return next(row[2] for row in rows if row[:2] == ["ten", "0"])

    for to, expected in (("start", "0"), ("-3", "7"), ("+4", "4"), ("end", "10"), ("6", "6"),
                         (f"@{BASE_MS + 5 * 60_000}", "5"),
                         (str((BASE_MS + 8 * 60_000) // 1000), "8"),  # bare unix seconds, as rpk
                         ("99", "10")):
        done = kbroker(broker, "group", "seek", "g", "--to", to, "--topics", "ten")
        assert done.returncode == 0, (to, done.stderr)
        assert committed() == expected, to
    done = kbroker(broker, "group", "seek", "g", "--to", "1:3", "--topics", "ten")
    assert (done.returncode, done.stderr.strip()) == (2, "kbroker: --to 1:3: one position, not a range")


@pytest.mark.parametrize("offset,message", [
    ("soon", "kbroker: -o 'soon': expected start, end, N, +N, -N, @TIMESTAMP or a range"),
    ("3:x", "kbroker: -o end of range 'x': expected end or an offset"),
    ("@yesterday", "kbroker: -o timestamp 'yesterday': expected unix ms (13 digits) or s "
                   "(9-10 digits), YYYY-MM-DD, YYYY-MM-DDTHH:MM:SSZ or a duration like -1h"),
])
def test_bad_offsets_are_one_line(broker, offset, message):
    done = kbroker(broker, "topic", "consume", "ten", "-o", offset)
    assert (done.returncode, done.stderr.strip()) == (2, message)


def test_parser_readings():
    assert parse("-5") == parse("-5:").__class__(Position("before_end", 5), None)
    assert parse("oldest:end").stop == Position("end")
    day = int(datetime.datetime(2022, 2, 14, tzinfo=datetime.timezone.utc).timestamp() * 1000)
    assert parse("@2022-02-14:1h").begin == Position("time", day)
    assert parse("@2022-02-14:1h").stop == Position("time", day + 3_600_000)
    assert parse("@2022-02-14T10:00:00Z:end").begin == Position("time", day + 10 * 3_600_000)
    assert timestamp("-1m3ms", 100_000) == 100_000 - 60_003
    assert timestamp("1700000000", 0) == 1_700_000_000_000
    with pytest.raises(OffsetError):
        parse("@1:2:3")
