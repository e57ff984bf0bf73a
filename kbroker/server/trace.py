"""Protocol trace: every request and response decoded, one log line each (logger ``kbroker.trace``).

Turned on by ``kbroker.trace=text|json`` (static, ``--trace``, or a dynamic broker config) and
narrowed by ``kbroker.trace.apis`` and ``kbroker.trace.client.ids``. A line names the API and
version, correlation id, client id and the client software (name and version from its
ApiVersions v3+ request, KIP-511), the peer, the decoded message (records shown as their size),
and for a response its latency and the error codes it carries. Off, the dispatcher pays one
attribute check per request.
"""

from __future__ import annotations

import json
import logging
import uuid

from kbroker.protocol.errors import ErrorCode

log = logging.getLogger("kbroker.trace")

_MAX_ITEMS = 20  # longer lists are cut, with a note of how many were left out


class Tracer:
    def __init__(self, fmt: str, apis, client_ids):
        self.json = fmt == "json"
        self.apis = {a.lower() for a in apis}
        self.client_ids = set(client_ids)

    def wants(self, api_name: str, client_id: str | None) -> bool:
        return (not self.apis or api_name.lower() in self.apis) and \
            (not self.client_ids or client_id in self.client_ids)

    def request(self, api_name: str, ctx, request, software, peer: str) -> None:
        fields = {"event": "request", "api": api_name, "version": ctx.api_version,
                  "correlation_id": ctx.correlation_id, "client_id": ctx.client_id,
                  "client_software": software, "peer": peer, "request": to_plain(request)}
        if self.json:
            log.info(json.dumps(fields, default=str))
        else:
            sw = f" ({software[0]} {software[1]})" if software else ""
            log.info("-> %s v%d corr=%d client=%s%s from %s %s", api_name, ctx.api_version,
                     ctx.correlation_id, ctx.client_id, sw, peer, _text(fields["request"]))

    def response(self, api_name: str, ctx, response, latency_ms: float, errors) -> None:
        names = [ErrorCode.for_code(code).name for code in errors]
        if self.json:
            log.info(json.dumps({"event": "response", "api": api_name, "version": ctx.api_version,
                                 "correlation_id": ctx.correlation_id,
                                 "client_id": ctx.client_id, "latency_ms": round(latency_ms, 3),
                                 "errors": names, "response": to_plain(response)}, default=str))
        else:
            log.info("<- %s v%d corr=%d client=%s %.2f ms%s %s", api_name, ctx.api_version,
                     ctx.correlation_id, ctx.client_id, latency_ms,
                     f" errors={','.join(names)}" if names else "", _text(to_plain(response)))

    def no_response(self, api_name: str, ctx, latency_ms: float, why: str) -> None:
        if self.json:
            log.info(json.dumps({"event": why, "api": api_name, "version": ctx.api_version,
                                 "correlation_id": ctx.correlation_id,
                                 "client_id": ctx.client_id, "latency_ms": round(latency_ms, 3)}))
        else:
            log.info("<- %s v%d corr=%d client=%s %.2f ms: %s", api_name, ctx.api_version,
                     ctx.correlation_id, ctx.client_id, latency_ms, why)


def to_plain(message):
    """A message as JSON-able values: records and bytes as their size, long lists cut."""
    if message is None or isinstance(message, (bool, int, float, str)):
        return message
    if isinstance(message, uuid.UUID):
        return str(message)
    if isinstance(message, (bytes, bytearray, memoryview)):
        return f"<{len(message)} bytes>"
    decoded = getattr(message, "decoded", None)
    if decoded is not None:  # an entry kept encoded (Metadata's topics): shown as the message
        return to_plain(decoded())
    if isinstance(message, list):
        if message and not hasattr(message[0], "FIELD_NAMES") and \
                not hasattr(message[0], "decoded") and \
                not isinstance(message[0], (bool, int, float, str, uuid.UUID, list)):
            return f"<{sum(len(part) for part in message)} bytes>"  # file regions
        items = [to_plain(item) for item in message[:_MAX_ITEMS]]
        if len(message) > _MAX_ITEMS:
            items.append(f"... {len(message) - _MAX_ITEMS} more")
        return items
    names = getattr(message, "FIELD_NAMES", None)
    if names is None:
        try:
            return f"<{len(message)} bytes>"
        except TypeError:
            return repr(message)
    return {name: to_plain(getattr(message, name)) for name in names}


def _text(value) -> str:
    return json.dumps(value, default=str, separators=(",", ":"))


def error_codes(message) -> list[int]:
    """Every non-zero ``error_code`` in a response, in order, without repeats."""
    found: list[int] = []
    _collect(message, found)
    return found


def _collect(message, found) -> None:
    kept = getattr(message, "error_codes", None)  # an entry kept encoded lists its own
    if kept is not None:
        found.extend(code for code in kept if code not in found)
        return
    names = getattr(message, "FIELD_NAMES", None)
    if names is None:
        return
    for name in names:
        value = getattr(message, name)
        if name == "error_code":
            if value and value not in found:
                found.append(value)
        elif type(value) is list and value and (hasattr(value[0], "FIELD_NAMES")
                                                or hasattr(value[0], "error_codes")):
            for item in value:
                _collect(item, found)
