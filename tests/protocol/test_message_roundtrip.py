"""Every generated message, every valid version: encode -> decode -> equal, and decode -> encode ->
the same bytes. Hostile input (truncated, mutated, random) raises only DecodeError."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbroker.protocol import messages
from kbroker.protocol.messages import headers
from kbroker.protocol.primitives import DecodeError

from .message_strategies import message_strategy


def _all_cases():
    classes = []
    for key in sorted(messages.API_BY_KEY):
        classes.append(messages.request_class(key))
        classes.append(messages.response_class(key))
    classes += [headers.RequestHeader, headers.ResponseHeader]
    # Data schemas (ConsumerProtocolSubscription, ...) and every coordinator record key and value.
    classes += [messages.schema_class(name) for name in sorted(messages.SCHEMAS)]
    for cls in classes:
        lo, hi = cls.VALID_VERSIONS
        for version in range(lo, hi + 1):
            yield pytest.param(cls, version, id=f"{cls.__name__}-v{version}")


CASES = list(_all_cases())
SETTINGS = settings(max_examples=12, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def test_every_api_has_cases():
    # Apache Kafka 4.4.0's jars: 91 APIs with versions (618 request and response versions), the
    # two headers (5 versions), 11 data schemas and 50 coordinator record schemas (77 versions).
    assert len(messages.API_BY_KEY) == 91
    assert len(messages.SCHEMAS) == 61
    assert len(CASES) == 700


@pytest.mark.parametrize("cls,version", CASES)
@SETTINGS
@given(data=st.data())
def test_round_trip(cls, version, data):
    message = data.draw(message_strategy(cls, version))
    encoded = b"".join(message.encode(version))
    decoded = cls.decode(memoryview(encoded), version)
    assert decoded == message
    assert b"".join(decoded.encode(version)) == encoded


@pytest.mark.parametrize("cls,version", CASES)
@settings(max_examples=4, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_hostile_input_raises_only_decode_error(cls, version, data):
    message = data.draw(message_strategy(cls, version))
    encoded = bytearray(b"".join(message.encode(version)))
    # Every strict prefix is a truncated message.
    whole = bytes(encoded)
    for cut in range(len(encoded)):
        try:
            cls.decode(memoryview(whole)[:cut], version)
        except DecodeError:
            continue
        pytest.fail(f"{cls.__name__} v{version} decoded {cut} of its {len(whole)} bytes")
    # Mutations either decode or raise DecodeError, nothing else. Their places and bytes come
    # from one drawn seed (shown when a case fails): sixteen draws through Hypothesis cost more
    # than the whole test besides.
    if encoded:
        rng = random.Random(data.draw(st.integers(0, 2**64 - 1), label="mutation seed"))
        for _ in range(8):
            index = rng.randrange(len(encoded))
            mutated = bytearray(encoded)
            mutated[index] = rng.randrange(256)
            try:
                cls.decode(memoryview(bytes(mutated)), version)
            except DecodeError:
                pass
    noise = data.draw(st.binary(max_size=64))
    try:
        cls.decode(memoryview(noise), version)
    except DecodeError:
        pass


def test_unknown_tagged_fields_survive_a_round_trip():
    cls = messages.request_class(18)  # ApiVersionsRequest v3 is flexible
    request = cls(client_software_name="kcat", client_software_version="1.7")
    encoded = request.to_bytes(3)
    # Replace the empty tag section (last byte) with one unknown tag 7 holding b"hey".
    with_tag = encoded[:-1] + bytes([1, 7, 3]) + b"hey"
    decoded = cls.decode(with_tag, 3)
    assert decoded.unknown_tagged_fields == [(7, b"hey")]
    assert decoded.to_bytes(3) == with_tag


def test_field_missing_from_a_version_is_an_error_unless_ignorable():
    from kbroker.protocol.primitives import EncodeError
    produce = messages.request_class(0)
    # TransactionalId exists from v3 only, and Produce's valid range starts at v3: always fine.
    metadata = messages.request_class(3)
    # AllowAutoTopicCreation (v4+) is not ignorable: setting it to a non-default value in v3 fails.
    request = metadata(topics=None, allow_auto_topic_creation=False)
    with pytest.raises(EncodeError):
        request.encode(3)
    assert metadata.decode(request.to_bytes(4), 4).allow_auto_topic_creation is False
    # An ignorable field is silently dropped.
    fetch_response = messages.response_class(1)
    response = fetch_response(throttle_time_ms=5)
    assert fetch_response.decode(response.to_bytes(4), 4).throttle_time_ms == 5
    assert produce.VALID_VERSIONS == (3, 13)


def test_records_are_zero_copy():
    produce = messages.request_class(0)
    payload = bytearray(b"r" * 4096)
    request = produce(acks=1, timeout_ms=1000, topic_data=[produce.TopicProduceData(
        name="t", partition_data=[produce.PartitionProduceData(index=0, records=payload)])])
    for version in (3, 9):
        parts = request.encode(version)
        assert any(part is payload for part in parts), "records must be passed through, not copied"
        buf = memoryview(b"".join(parts))
        decoded = produce.decode(buf, version)
        records = decoded.topic_data[0].partition_data[0].records
        assert isinstance(records, memoryview) and records.obj is buf.obj
        assert records == payload
