"""How brokers find each other's registry: the URL each broker registers (filled in below)."""

from __future__ import annotations

LISTENER = "SCHEMA_REGISTRY"


def registry_url(info) -> str | None:
    endpoint = info.endpoints.get(LISTENER)
    if endpoint is None:
        return None
    host, port = endpoint
    return f"http://{host}:{port}"
