"""``kbroker dev`` (the dev profile) serves the registry with no setting: on 8081 when it is free,
else on a free port, named by the in-process and subprocess test brokers."""

from __future__ import annotations

import json
import urllib.request

from kbroker.testing import KafkaBroker
from kbroker.testing.subprocess_broker import SubprocessKafkaBroker


def _register(url: str) -> dict:
    body = json.dumps({"schema": '"string"'}).encode()
    request = urllib.request.Request(url + "/subjects/dev-value/versions", data=body,
                                     method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as reply:
        return json.loads(reply.read())


def test_dev_brokers_serve_the_registry():
    with KafkaBroker() as first, SubprocessKafkaBroker() as second:
        urls = [first.schema_registry_url, second.schema_registry_url]
        assert all(url.startswith("http://127.0.0.1:") for url in urls)
        assert urls[0] != urls[1]  # one of them (at most) has 8081; the other a free port
        for url in urls:
            assert _register(url) == {"id": 1}


def test_off_without_dev_mode_or_listeners():
    with KafkaBroker(dev=False) as kafka:
        assert kafka.schema_registry_url is None


def _get(url: str):
    with urllib.request.urlopen(url, timeout=30) as reply:
        return json.loads(reply.read())


def test_the_state_is_built_on_the_first_request_or_at_start_when_there_is_some(tmp_path):
    """The listener binds at start; the ``_schemas`` runtime behind it comes with the first
    request, or at start when ``_schemas`` already exists (kbroker.schema_registry.service)."""
    with KafkaBroker(data_dir=tmp_path) as kafka:
        registry = kafka.broker.schema_registry
        assert registry.url == kafka.schema_registry_url and registry.runtime is None
        assert _get(kafka.schema_registry_url + "/subjects") == []  # before the topic exists
        assert registry.runtime is not None
        assert _register(kafka.schema_registry_url) == {"id": 1}
    with KafkaBroker(data_dir=tmp_path) as kafka:  # restarted: _schemas to load
        assert kafka.broker.schema_registry.runtime is not None
        assert _get(kafka.schema_registry_url + "/subjects") == ["dev-value"]
