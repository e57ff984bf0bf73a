"""Decoding of golden bytes captured from real clients talking to Apache Kafka 4.3.1
(tests/golden/, made by tools/capture_goldens.py): every captured request and response decodes
with the generated classes and re-encodes to the same bytes, and every captured record batch
(each client x each codec) passes its CRC and decodes to the records the client sent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kbroker.protocol import messages
from kbroker.protocol.messages.headers import RequestHeader, ResponseHeader
from kbroker.protocol.records import decode_records, iter_batches

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
MANIFEST = json.loads((GOLDEN / "manifest.json").read_text())
FRAMES = [f for f in MANIFEST["files"] if f["direction"] in ("request", "response")]
BATCHES = [f for f in MANIFEST["files"] if f["direction"] == "records"]


def test_goldens_cover_every_client_and_codec():
    clients = {f["client"] for f in BATCHES}
    assert clients == {"confluent-kafka", "kafka-python", "aiokafka", "java"}
    assert {f["codec"] for f in BATCHES} == {"none", "gzip", "snappy", "lz4", "zstd"}
    for client in clients:
        apis = {f["api_name"] for f in FRAMES if f["client"] == client}
        assert {"api_versions", "metadata", "produce", "fetch"} <= apis, client


@pytest.mark.parametrize("entry", FRAMES, ids=[f["path"] for f in FRAMES])
def test_captured_frame_decodes_and_reencodes(entry):
    data = (GOLDEN / entry["path"]).read_bytes()
    api_key, version = entry["api_key"], entry["api_version"]
    view = memoryview(data)
    if entry["direction"] == "request":
        header_version = messages.request_header_version(api_key, version)
        header, pos = RequestHeader.read(view, 0, header_version)
        assert (header.request_api_key, header.request_api_version) == (api_key, version)
        cls = messages.request_class(api_key)
    else:
        header_version = messages.response_header_version(api_key, version)
        header, pos = ResponseHeader.read(view, 0, header_version)
        cls = messages.response_class(api_key)
    body, end = cls.read(view, pos, version)
    assert end == len(data), "every byte of the frame is accounted for"
    assert header.to_bytes(header_version) + b"".join(body.encode(version)) == data


def _expected(record):
    def enc(value):
        return None if value is None else value.encode()
    return (enc(record["key"]), enc(record["value"]),
            [(h["key"], enc(h["value"])) for h in record["headers"]])


@pytest.mark.parametrize("entry", BATCHES, ids=[f["path"] for f in BATCHES])
def test_client_batches_decode_and_verify(entry):
    data = memoryview((GOLDEN / entry["path"]).read_bytes())
    expected = json.loads((GOLDEN / entry["path"].replace(".bin", ".json")).read_text())
    records = []
    for batch in iter_batches(data):
        assert batch.magic == 2
        assert batch.is_valid_crc()
        assert batch.compression == ["none", "gzip", "snappy", "lz4", "zstd"].index(entry["codec"])
        assert batch.record_count == batch.last_offset_delta + 1
        records += decode_records(batch, 1 << 20)
    got = [(r.key, r.value, [(k, v) for k, v in r.headers]) for r in records]
    assert got == [_expected(r) for r in expected["expected_records"]]
