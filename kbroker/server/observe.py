"""What the dispatcher does around each request when anyone is watching: metrics, the protocol
trace, and DEBUG lines for connections and failed requests (logger ``kbroker.requests``).

The dispatcher holds ``observer = None`` when nothing watches (no HTTP port, trace off, that
logger above DEBUG at start-up): then a request costs one attribute check more than before.
"""

from __future__ import annotations

import logging
import time
import weakref

from kbroker.protocol.messages import API_BY_KEY
from kbroker.server.metrics import FETCH, PRODUCE, RequestMetrics
from kbroker.server.trace import Tracer, error_codes

log = logging.getLogger("kbroker.requests")
API_VERSIONS = 18


class RequestObserver:
    def __init__(self, metrics: RequestMetrics | None, tracer: Tracer | None, topic_name_of):
        self.metrics = metrics
        self.tracer = tracer
        self.topic_name_of = topic_name_of  # topic id -> name (Fetch v13+ names topics by id)
        # Client software per connection, from ApiVersions v3+ (KIP-511).
        self.software: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def begin(self, ctx, request, connection) -> tuple:
        """Called once a request is decoded; returns the token ``end`` gets back."""
        api_key = ctx.api_key
        if api_key == API_VERSIONS and connection is not None:
            self._connected(ctx, request, connection)
        tracer = self.tracer
        traced = tracer is not None and tracer.wants(API_BY_KEY[api_key].name, ctx.client_id)
        if traced:
            tracer.request(API_BY_KEY[api_key].name, ctx, request,
                           self.software.get(connection) if connection is not None else None,
                           getattr(connection, "peer", "?"))
        if api_key == PRODUCE and self.metrics is not None:
            self.metrics.produced(request)
        return time.perf_counter(), traced, connection

    def end(self, token, ctx, response) -> None:
        started, traced, connection = token
        latency_ms = (time.perf_counter() - started) * 1000
        metrics = self.metrics
        if response is None:  # acks=0 produce
            if traced:
                self.tracer.no_response(API_BY_KEY[ctx.api_key].name, ctx, latency_ms,
                                        "no response (acks=0)")
            if metrics is not None:
                metrics.request_done(ctx.api_key, ctx.api_version, latency_ms, ())
            return
        errors = response_errors(ctx.api_key, response)
        if traced:
            self.tracer.response(API_BY_KEY[ctx.api_key].name, ctx, response, latency_ms, errors)
        if metrics is not None:
            metrics.request_done(ctx.api_key, ctx.api_version, latency_ms, errors)
            if ctx.api_key == FETCH:
                metrics.fetched(response, self.topic_name_of)
        if errors and log.isEnabledFor(logging.DEBUG):
            from kbroker.protocol.errors import ErrorCode
            log.debug("%s v%d from %s (client %s, correlation id %d) answered with %s",
                      API_BY_KEY[ctx.api_key].name, ctx.api_version,
                      getattr(connection, "peer", "?"), ctx.client_id, ctx.correlation_id,
                      ", ".join(ErrorCode.for_code(code).name for code in errors))

    def dropped(self, token, ctx, why: str) -> None:
        started, traced, connection = token
        latency_ms = (time.perf_counter() - started) * 1000
        api_name = API_BY_KEY[ctx.api_key].name
        if traced:
            self.tracer.no_response(api_name, ctx, latency_ms, why)
        log.debug("%s v%d from %s (client %s, correlation id %d): %s", api_name, ctx.api_version,
                  getattr(connection, "peer", "?"), ctx.client_id, ctx.correlation_id, why)

    def _connected(self, ctx, request, connection) -> None:
        name = getattr(request, "client_software_name", None)
        if name:
            self.software[connection] = (name, request.client_software_version)
        log.debug("connection from %s: client id %s, software %s %s",
                  getattr(connection, "peer", "?"), ctx.client_id, name or "unknown",
                  getattr(request, "client_software_version", "") or "")


def response_errors(api_key: int, response) -> list:
    """The non-zero error codes of a response; Produce and Fetch (the hot path) read only
    their partitions, other APIs are walked generically."""
    if api_key == PRODUCE:
        found = []
        for topic in response.responses:
            for partition in topic.partition_responses:
                code = partition.error_code
                if code and code not in found:
                    found.append(code)
        return found
    if api_key == FETCH:
        found = [response.error_code] if response.error_code else []
        for topic in response.responses:
            for partition in topic.partitions:
                code = partition.error_code
                if code and code not in found:
                    found.append(code)
        return found
    return error_codes(response)
