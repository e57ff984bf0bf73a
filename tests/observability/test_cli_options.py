"""``kbroker serve --trace json --log-format json --http-port 0 --log-level DEBUG``: every log
line is a JSON object, the trace events are JSON inside them, and DEBUG names each connection
and each failed request."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient

TIMEOUT = 20


def test_json_logs_trace_http_and_debug_lines(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "kbroker.cli.main", "serve", "--trace", "json", "--log-format",
         "json", "--http-port", "0", "--log-level", "DEBUG",
         "--set", "listeners=PLAINTEXT://127.0.0.1:0", "--set", f"log.dirs={tmp_path / 'data'}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    ready = threading.Event()

    def pump():
        for line in proc.stdout:
            lines.append(line)
            if "kbroker ready" in line:
                ready.set()
    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        assert ready.wait(TIMEOUT), "".join(lines)
        port = re.search(r"127\.0\.0\.1:(\d+), data in", "".join(lines)).group(1)
        producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", client_id="cli-test")
        producer.send("cli", b"x").get(TIMEOUT)
        producer.close()
        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}")
        try:
            admin.delete_topics(["no-such-topic"], timeout_ms=5000)
        except Exception:
            pass  # UNKNOWN_TOPIC_OR_PARTITION: the failed request we want logged
        admin.close()
    finally:
        proc.terminate()
        proc.wait(TIMEOUT)
        reader.join(TIMEOUT)  # every line the broker wrote, up to its exit
    # Log records (the JSON ready line on stdout has no logger: it is the ready event).
    entries = [e for e in (json.loads(line) for line in lines if line.strip()) if "logger" in e]
    assert any(e["logger"] == "kbroker.http" and "kbroker HTTP on http://" in e["message"]
               for e in entries)
    trace = [json.loads(e["message"]) for e in entries if e["logger"] == "kbroker.trace"]
    assert any(t["api"] == "Produce" and t["client_id"] == "cli-test" for t in trace)
    debug = [e["message"] for e in entries if e["logger"] == "kbroker.requests"]
    assert any(m.startswith("connection from 127.0.0.1:") for m in debug)
    assert any("DeleteTopics" in m and "UNKNOWN_TOPIC_OR_PARTITION" in m for m in debug)
