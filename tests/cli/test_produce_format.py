"""``kbroker topic produce -f``: rpk-style input formats against kbroker (read back with
``topic consume -f``), the parser's readings, and one-line refusals."""

from __future__ import annotations

import io
import subprocess

import pytest

from kbroker.cli.commands.produce_format import FormatError, compile_format, records
from kbroker.testing import KafkaBroker, KafkaHelpers
from tests.cli.command import run_kbroker



def kbroker(brokers: str, *args, stdin: str = "") -> subprocess.CompletedProcess:
    return run_kbroker(*args, "--brokers", brokers, stdin=stdin.encode(), text=False)


@pytest.fixture(scope="module")
def broker():
    with KafkaBroker() as kafka:
        helpers = KafkaHelpers(kafka.bootstrap_servers)
        helpers.create_topics("kv", "t1", "t2")
        helpers.create_topics("parts", partitions=2)
        helpers.close()
        yield kafka.bootstrap_servers


def consumed(broker: str, topic: str, fmt: str) -> str:
    done = kbroker(broker, "topic", "consume", topic, "-o", ":end", "-f", fmt)
    assert done.returncode == 0, done.stderr
    return done.stdout.decode()


def test_key_and_value(broker):
    done = kbroker(broker, "topic", "produce", "kv", "-f", "%k %v\\n", "-q",
                   stdin="user1 hello world\nuser2 bye\n")
    assert done.returncode == 0, done.stderr
    assert consumed(broker, "kv", "%k=%v\\n") == "user1=hello world\nuser2=bye\n"


def test_topic_from_the_input(broker):
    done = kbroker(broker, "topic", "produce", "-f", "%t;%v\\n", "-q", stdin="t1;one\nt2;two\nt1;three")
    assert done.returncode == 0, done.stderr
    assert consumed(broker, "t1", "%v\\n") == "one\nthree\n"
    assert consumed(broker, "t2", "%v\\n") == "two\n"


def test_headers_and_partition(broker):
    done = kbroker(broker, "topic", "produce", "parts", "-f", "%h|%p|%v\\n", "-H", "src:cli", "-q",
                   stdin="a=1,b=2|1|x\n|0|y\n")
    assert done.returncode == 0, done.stderr
    assert consumed(broker, "parts", "%p %v %h\\n").splitlines() == ["0 y src=cli",
                                                                     "1 x src=cli,a=1,b=2"]


@pytest.mark.parametrize("args,stdin,message", [
    (["kv", "-f", "%k%v"], "", "kbroker: -f: %v follows another field with nothing between them; "
                                "put a delimiter between fields"),
    (["kv", "-f", "%K{4}%k%v"], "", "kbroker: -f: %K (key length, size-prefixed input) is not "
                                     "implemented; use delimiters"),
    (["kv", "-f", "%v{hex}"], "", "kbroker: -f: modifiers such as %v{...} are not implemented"),
    (["-f", "%v\\n"], "x\n", "kbroker: name a TOPIC, or read it from the input with -f '...%t...'"),
    (["parts", "-f", "%p %v\\n"], "zero y\n", "kbroker: -f: record 1: partition 'zero' is not a number"),
])
def test_bad_formats_and_input_are_one_line(broker, args, stdin, message):
    done = kbroker(broker, "topic", "produce", *args, stdin=stdin)
    assert (done.returncode, done.stderr.decode().strip()) == (2, message)


def read(fmt: str, data: bytes) -> list[tuple]:
    return [(r.topic, r.key, r.value, r.partition, r.headers)
            for r in records(compile_format(fmt), io.BytesIO(data))]


def test_parser_readings():
    assert read("%v\\n", b"a\n\nb") == [(None, None, b"a", None, []), (None, None, b"", None, []),
                                        (None, None, b"b", None, [])]
    assert read("<%k>%v;", b"<a>1;<b>2;") == [(None, b"a", b"1", None, []), (None, b"b", b"2", None, [])]
    assert read("%v\\x00", b"a\x00b\x00") == [(None, None, b"a", None, []), (None, None, b"b", None, [])]
    assert read("%k\\t%v", b"k\tall\nthe rest") == [(None, b"k", b"all\nthe rest", None, [])]
    assert read("100%% %v\\n", b"100% x\n") == [(None, None, b"x", None, [])]
    with pytest.raises(FormatError, match="expected '<' in the input"):
        read("<%v>", b"zz")
    with pytest.raises(FormatError, match="the format reads no value"):
        compile_format("%k\\n")
