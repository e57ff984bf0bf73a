"""The registry in ``/metrics`` (requests per endpoint and status) and in the web console (the
subjects, their versions and schemas), the console seen in a real headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
import urllib.request

import pytest

from tests.schema_registry.conftest import free_port, start_registry

TIMEOUT = 20
SCHEMA = json.dumps({"type": "record", "name": "Shown", "fields": [{"name": "x",
                                                                   "type": "long"}]})


@pytest.fixture
def with_http(tmp_path):
    http_port = free_port()
    registry = start_registry(tmp_path, overrides={"http.port": http_port})
    registry.http = f"http://127.0.0.1:{http_port}/"
    yield registry
    registry.broker.kill()


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=TIMEOUT) as reply:
        return reply.read().decode()


def test_metrics_count_requests_by_endpoint_and_status(with_http):
    r = with_http
    r.call("POST", "/subjects/m-value/versions", {"schema": SCHEMA})
    r.call("GET", "/schemas/ids/1")
    r.call("GET", "/schemas/ids/1")
    r.call("GET", "/schemas/ids/42")
    text = _get(r.http + "metrics")

    def count(endpoint: str, status: int) -> float:
        pattern = (r'kbroker_schema_registry_requests_total\{endpoint="' + re.escape(endpoint) +
                   r'",status="' + str(status) + r'"\} ([0-9.]+)')
        match = re.search(pattern, text)
        return float(match.group(1)) if match else 0.0

    assert count("POST /subjects/{subject}/versions", 200) == 1
    assert count("GET /schemas/ids/{id}", 200) == 2
    assert count("GET /schemas/ids/{id}", 404) == 1


def test_console_lists_subjects_versions_and_schemas(with_http):
    r = with_http
    assert r.call("POST", "/subjects/shown-value/versions", {"schema": SCHEMA})[0] == 200
    api = json.loads(_get(r.http + "api/subjects"))
    assert api["url"] == r.url
    assert [s["subject"] for s in api["subjects"]] == ["shown-value"]
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("chromium is not installed: run scripts/install-test-deps.sh")
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True,
                                    args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            page = browser.new_page()
            page.goto(r.http + "#/subjects", timeout=TIMEOUT * 1000)
            page.wait_for_selector("#subjects a:text('shown-value')", timeout=TIMEOUT * 1000)
            row = page.locator("#subjects tbody tr td").all_inner_texts()
            assert row[:4] == ["shown-value", "1", "", "1"]
            page.click("#subjects a:text('shown-value')")
            page.wait_for_selector("#versions tbody tr", timeout=TIMEOUT * 1000)
            cells = page.locator("#versions tbody tr td").all_inner_texts()
            assert cells[:3] == ["1", "1", "AVRO"]
            assert json.loads(cells[4]) == json.loads(SCHEMA)
        finally:
            browser.close()
