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
    registered = handlers.load_all()  # raises when a module registers what the table does not say
    assert set(dict.keys(registered)) == set(messages.ADVERTISED)


def test_handler_modules_are_imported_on_their_first_request():
    import sys

    registry = handlers.load()
    fetch_key = messages.API_KEY_BY_NAME["Fetch"]
    assert fetch_key in registry  # served, whether or not its module is loaded yet
    assert registry[fetch_key] is not None
    assert "kbroker.handlers.fetch" in sys.modules
    assert 9999 not in registry and registry.get(9999) is None


# --- eager handlers (handles(..., eager=True)): run in the read callback up to their first wait --

def _api_versions_frame():
    return frame(18, 3, messages.request_class(18)(client_software_name="t",
                                                   client_software_version="1"))


def _eager_dispatcher(handler):
    handler.eager = True
    return Dispatcher(services=None, handlers={18: handler})


def _answer(ctx, error_code):
    return messages.response_class(18)(error_code=error_code)


def test_eager_handler_that_never_waits_is_answered_without_a_task():
    import asyncio

    ran = []

    async def handler(ctx, request):
        ran.append(True)
        return _answer(ctx, 0)

    async def main():
        parts = _eager_dispatcher(handler).handle(_api_versions_frame())
        # Ran already, and the answer is the encoded buffers, not a future of them.
        assert ran == [True]
        assert isinstance(parts, list)
        header, body = parse_response(parts, 18, 3)
        assert (header.correlation_id, body.error_code) == (7, 0)
        assert asyncio.all_tasks() == {asyncio.current_task()}

    asyncio.run(main())


def test_eager_handler_that_waits_carries_on_in_a_task():
    import asyncio

    async def main():
        gate = asyncio.get_running_loop().create_future()
        steps = []

        async def handler(ctx, request):
            steps.append("first")
            error_code = await gate  # a real wait: the rest runs later, in a task
            steps.append("rest")
            await asyncio.sleep(0)
            return _answer(ctx, error_code)

        pending = _eager_dispatcher(handler).handle(_api_versions_frame())
        assert steps == ["first"] and isinstance(pending, asyncio.Future)
        gate.set_result(Errors.UNKNOWN_SERVER_ERROR.code)
        _, body = parse_response(await pending, 18, 3)
        assert steps == ["first", "rest"]
        assert body.error_code == Errors.UNKNOWN_SERVER_ERROR.code

    asyncio.run(main())


def test_eager_handler_failures_and_cancellation_reach_it_as_with_a_task():
    import asyncio

    async def main():
        async def fails_at_once(ctx, request):
            raise ValueError("first step")

        failed = _eager_dispatcher(fails_at_once).handle(_api_versions_frame())
        with pytest.raises(ValueError, match="first step"):
            await failed

        gate = asyncio.get_running_loop().create_future()
        seen = []

        async def waits(ctx, request):
            try:
                await gate
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise

        pending = _eager_dispatcher(waits).handle(_api_versions_frame())
        await asyncio.sleep(0)
        pending.cancel()  # the connection closed: the handler must let go of what it waits on
        for _ in range(3):
            await asyncio.sleep(0)
        assert seen == ["cancelled"] and gate.cancelled()

        def raises_later(ctx, request):
            async def run():
                await asyncio.sleep(0)
                raise KeyError("later")
            return run()

        with pytest.raises(KeyError):
            await _eager_dispatcher(raises_later).handle(_api_versions_frame())

    asyncio.run(main())
