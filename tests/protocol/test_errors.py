import pytest

from kbroker.protocol.errors import ErrorCode, Errors, KafkaError


def test_codes_are_unique_and_contiguous():
    codes = [e.code for e in ErrorCode]
    assert len(codes) == len(set(codes))
    assert codes == list(range(-1, len(codes) - 1))
    assert len(codes) >= 130


@pytest.mark.parametrize(
    "code, name, retriable",
    [
        (-1, "UNKNOWN_SERVER_ERROR", False),
        (0, "NONE", False),
        (1, "OFFSET_OUT_OF_RANGE", False),
        (2, "CORRUPT_MESSAGE", True),
        (3, "UNKNOWN_TOPIC_OR_PARTITION", True),
        (6, "NOT_LEADER_OR_FOLLOWER", True),
        (7, "REQUEST_TIMED_OUT", True),
        (10, "MESSAGE_TOO_LARGE", False),
        (15, "COORDINATOR_NOT_AVAILABLE", True),
        (16, "NOT_COORDINATOR", True),
        (22, "ILLEGAL_GENERATION", False),
        (27, "REBALANCE_IN_PROGRESS", False),
        (35, "UNSUPPORTED_VERSION", False),
        (40, "INVALID_CONFIG", False),
        (45, "OUT_OF_ORDER_SEQUENCE_NUMBER", False),
        (51, "CONCURRENT_TRANSACTIONS", True),
        (74, "FENCED_LEADER_EPOCH", True),
        (87, "INVALID_RECORD", False),
        (90, "PRODUCER_FENCED", False),
        (100, "UNKNOWN_TOPIC_ID", True),
        (133, "SHARE_SESSION_LIMIT_REACHED", True),
    ],
)
def test_spot_checks(code, name, retriable):
    err = ErrorCode.for_code(code)
    assert err.name == name
    assert err.code == code == int(err)
    assert err.retriable is retriable
    assert ErrorCode.for_name(name) is err
    assert getattr(Errors, name) is err


def test_every_error_but_none_has_a_message():
    assert Errors.NONE.message == ""
    assert all(e.message for e in ErrorCode if e is not Errors.NONE)
    assert "max message size" in Errors.MESSAGE_TOO_LARGE.message


def test_unknown_code_maps_to_unknown_server_error():
    assert ErrorCode.for_code(30000) is Errors.UNKNOWN_SERVER_ERROR
    with pytest.raises(KeyError):
        ErrorCode.for_name("NO_SUCH_ERROR")


def test_kafka_error_carries_code_and_message():
    with pytest.raises(KafkaError) as info:
        raise KafkaError(Errors.MESSAGE_TOO_LARGE, "batch of 1200000 bytes exceeds max.message.bytes=1048588")
    exc = info.value
    assert exc.error is Errors.MESSAGE_TOO_LARGE
    assert exc.code == 10
    assert not exc.retriable
    assert exc.message.startswith("batch of 1200000")
    assert str(exc) == "MESSAGE_TOO_LARGE: batch of 1200000 bytes exceeds max.message.bytes=1048588"


def test_kafka_error_defaults_and_int_codes():
    exc = Errors.NOT_LEADER_OR_FOLLOWER.exception()
    assert isinstance(exc, KafkaError)
    assert exc.message == Errors.NOT_LEADER_OR_FOLLOWER.message
    assert exc.retriable
    assert KafkaError(87).error is Errors.INVALID_RECORD
    assert KafkaError(-1, "boom").error is Errors.UNKNOWN_SERVER_ERROR


def test_protocol_errors_module_is_sans_io():
    import kbroker.protocol.errors as mod

    source = open(mod.__file__).read()
    assert "import asyncio" not in source and "import socket" not in source
