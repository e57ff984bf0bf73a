"""The dispatcher seam without sockets: frame in, response buffers out."""

from __future__ import annotations

import struct

import pytest

from kbroker import handlers
from kbroker.protocol import messages
from kbroker.protocol.errors import Errors
from kbroker.protocol.messages.headers import RequestHeader, ResponseHeader
from kbroker.server.connection import Closed
from kbroker.server.dispatch import Dispatcher
from tests.frames import encode_request


@pytest.fixture(scope="module")
def dispatcher():
    return Dispatcher(services=None, handlers=handlers.load())


def frame(api_key, version, body_obj, correlation_id=7, client_id="test"):
    return memoryview(encode_request(api_key, version, body_obj, correlation_id, client_id))


def parse_response(parts, api_key, version):
    data = b"".join(bytes(p) for p in parts)
    (size,) = struct.unpack_from(">i", data)
    assert size == len(data) - 4
    header, pos = ResponseHeader.read(memoryview(data), 4,
                                      messages.response_header_version(api_key, version))
    body = messages.response_class(api_key).decode(memoryview(data)[pos:], version)
    return header, body


@pytest.mark.parametrize("version", range(0, 6))
def test_api_versions_every_version(dispatcher, version):
    request = messages.request_class(18)(client_software_name="kbroker-test",
                                         client_software_version="1.0")
    parts = dispatcher.handle(frame(18, version, request))
    header, body = parse_response(parts, 18, version)
    assert header.correlation_id == 7
    assert body.error_code == 0
    advertised = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
    assert advertised == {k: v for k, v in messages.ADVERTISED.items()}
    assert advertised[18] == (0, 5)


def test_api_versions_from_the_future_gets_a_v0_answer(dispatcher):
    # KIP-511: the body of an unknown version is not parsed; the answer is v0 with our ranges.
    header = RequestHeader(request_api_key=18, request_api_version=99, correlation_id=5,
                           client_id="future").to_bytes(2)
    parts = dispatcher.handle(memoryview(header + b"\x00whatever"))
    header, body = parse_response(parts, 18, 0)
    assert header.correlation_id == 5
    assert body.error_code == Errors.UNSUPPORTED_VERSION.code
    assert any(k.api_key == 18 and k.max_version == 5 for k in body.api_keys)


def test_invalid_client_software_name_is_rejected(dispatcher):
    request = messages.request_class(18)(client_software_name="bad name!",
                                         client_software_version="1")
    _, body = parse_response(dispatcher.handle(frame(18, 3, request)), 18, 3)
    assert body.error_code == Errors.INVALID_REQUEST.code
    # As Kafka's error answer: nothing but the error (no ranges, no features).
    assert (body.api_keys, body.supported_features, body.finalized_features_epoch) == ([], [], -1)


@pytest.mark.parametrize("given", [{"cluster_id": "some-cluster"}, {"node_id": 1},
                                   {"cluster_id": "", "node_id": -1}])
def test_api_versions_v5_wants_both_cluster_id_and_node_id_or_neither(dispatcher, given):
    # KIP-1242; a cluster id or node id other than ours (REBOOTSTRAP_REQUIRED) is checked
    # against Kafka 4.4.0 in tests/integration/test_kafka_reference.py.
    request = messages.request_class(18)(client_software_name="kbroker-test",
                                         client_software_version="1", **given)
    _, body = parse_response(dispatcher.handle(frame(18, 5, request)), 18, 5)
    assert body.error_code == Errors.INVALID_REQUEST.code
    assert body.api_keys == []


@pytest.mark.parametrize("raw", [
    b"",  # empty frame
    b"\x00\x12\x00",  # shorter than a header
    struct.pack(">hhi", 999, 0, 1),  # unknown api key
    struct.pack(">hhi", 3, -1, 1),  # negative version
    struct.pack(">hhi", 3, 99, 1),  # Metadata v99
    struct.pack(">hhih", 3, 1, 1, 500) + b"short",  # client id longer than the frame
    struct.pack(">hhih", 3, 9, 1, 4) + b"test" + b"\xff\xff\xff\xff\xff\xff",  # bad tag varint
])
def test_bad_frames_close_the_connection(dispatcher, raw):
    with pytest.raises(Closed):
        dispatcher.handle(memoryview(raw))


def test_produce_v0_to_v2_are_advertised_but_rejected(dispatcher):
    assert messages.ADVERTISED[0][0] == 0
    with pytest.raises(Closed):
        dispatcher.handle(memoryview(struct.pack(">hhih", 0, 2, 1, -1) + b"\x00" * 16))


def test_registry_matches_manifest():
    registered = handlers.load()
    assert set(registered) == set(messages.ADVERTISED)
