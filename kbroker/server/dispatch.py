"""From a request frame to response buffers: header, version checks, decode, handler, encode.

This is the broker's ``handle(request_bytes) -> response_bytes`` seam: :meth:`Dispatcher.handle`
takes one frame (without its size prefix) and returns the response as a list of buffers (size
prefix included), an ``asyncio.Future`` of that list, or None when no response is due. Tests can
call it without a socket.

What a bad request gets, following Kafka:
- an ApiVersions request of a version we do not know: a v0-format ApiVersions answer with
  UNSUPPORTED_VERSION and our ranges, so the client can retry with a version we know (KIP-511);
- an unknown api key, a version outside what we advertise, or a version advertised only for a
  client's sake (Produce v0-2, KAFKA-18659): the connection is closed with a log line;
- a frame that cannot be decoded: the connection is closed with a log line.
Everyone else is served as before.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import struct
import time
import types

from kbroker.handlers.context import ANONYMOUS, CloseConnection, RequestContext
from kbroker.protocol import messages
from kbroker.protocol.messages import ADVERTISED, API_BY_KEY
from kbroker.protocol.messages.headers import RequestHeader, ResponseHeader
from kbroker.protocol.primitives import DecodeError, records_size
from kbroker.server.connection import Closed

log = logging.getLogger("kbroker.dispatch")

_KEY_VERSION_CORRELATION = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")
API_VERSIONS_KEY = 18


class Dispatcher:
    def __init__(self, services, handlers: dict):
        self.services = services
        self.handlers = handlers
        # Per-api fault injection: api_key -> fn(ctx, request) returning a response (or an
        # awaitable of one), None to fall through to the real handler, or raising Closed to drop
        # the connection. Tests set hooks directly; kbroker.fault.* rules install theirs through
        # the FaultInjector (kbroker.server.faults).
        self.faults: dict = {}
        # Metrics, trace and DEBUG request lines; None when nobody watches (kbroker.server.observe).
        self.observer = None
        self.metrics = None  # RequestMetrics, once the HTTP server wants them
        self.injector = None
        self._injected: set = set()
        config = getattr(services, "config", None)
        # Client quotas (kbroker.server.quotas): idle while no quota is set.
        self.quotas = None
        if config is not None and getattr(services, "controller", None) is not None:
            from kbroker.server.quotas import ClientQuotas

            self.quotas = ClientQuotas(config, lambda: services.controller.image)
        if config is not None:
            self.reconfigure()
            config.watch(lambda name: self.reconfigure()
                         if name.startswith("kbroker.") else None)

    def reconfigure(self) -> None:
        """Re-read the fault rules and the trace settings (after a dynamic config change)."""
        config = self.services.config
        if self.injector is None and config.fault_rule_names():
            # built with the first rule: most brokers never have one
            from kbroker.server.faults import FaultInjector

            self.injector = FaultInjector(config, self.handlers)
        if self.injector is not None:
            for api_key in self._injected:
                self.faults.pop(api_key, None)
            hooks = self.injector.reload()
            self.faults.update(hooks)
            self._injected = set(hooks)
        fmt = config.get("kbroker.trace")
        if fmt == "off" and self.metrics is None and \
                not logging.getLogger("kbroker.requests").isEnabledFor(logging.DEBUG):
            self.observer = None
            return
        from kbroker.server.observe import RequestObserver
        from kbroker.server.trace import Tracer

        tracer = None if fmt == "off" else Tracer(fmt, config.get("kbroker.trace.apis"),
                                                 config.get("kbroker.trace.client.ids"))
        software = self.observer.software if self.observer is not None else None
        self.observer = RequestObserver(self.metrics, tracer, self._topic_name_of)
        if software is not None:
            self.observer.software = software

    def _topic_name_of(self, topic_id) -> str:
        topic = self.services.controller.image.topic_by_id(topic_id)
        return topic.name if topic is not None else str(topic_id)

    def handle(self, frame: memoryview, connection=None):
        if len(frame) < 8:
            log.warning("closing connection from %s: %d-byte frame is too short for a request "
                        "header", _peer(connection), len(frame))
            raise Closed()
        api_key, version, correlation_id = _KEY_VERSION_CORRELATION.unpack_from(frame, 0)
        info = API_BY_KEY.get(api_key)
        advertised = ADVERTISED.get(api_key)
        if info is None or advertised is None or api_key not in self.handlers:
            log.warning("closing connection from %s: unknown or unsupported api key %d "
                        "(correlation id %d)", _peer(connection), api_key, correlation_id)
            raise Closed()
        lo, hi = advertised
        if not lo <= version <= hi:
            if api_key == API_VERSIONS_KEY:
                return self._unsupported_api_versions(correlation_id, version, connection)
            log.warning("closing connection from %s: %s v%d is not supported (we serve v%d-%d)",
                        _peer(connection), info.name, version, lo, hi)
            raise Closed()
        if version < info.valid_versions[0]:
            # Advertised only because clients misbehave otherwise (KAFKA-18659); not served.
            log.warning("closing connection from %s: %s v%d is advertised for compatibility but "
                        "not supported (minimum v%d)", _peer(connection), info.name, version,
                        info.valid_versions[0])
            raise Closed()
        try:
            header, pos = RequestHeader.read(
                frame, 0, messages.request_header_version(api_key, version))
            request, _ = messages.request_class(api_key).read(frame, pos, version)
        except DecodeError as exc:
            log.warning("closing connection from %s: cannot decode %s v%d request "
                        "(correlation id %d): %s", _peer(connection), info.name, version,
                        correlation_id, exc)
            raise Closed() from None
        ctx = RequestContext(self.services, api_key, version, correlation_id, header.client_id,
                             _client_host(connection), getattr(connection, "listener_name", None),
                             getattr(connection, "principal", ANONYMOUS),
                             getattr(connection, "session", None), connection)
        if api_key == API_VERSIONS_KEY and connection is not None:
            connection.client_id = header.client_id
            if getattr(request, "client_software_name", None):  # v3+ (KIP-511)
                connection.client_software = (request.client_software_name,
                                              request.client_software_version)
        observer = self.observer
        token = observer.begin(ctx, request, connection) if observer is not None else None
        try:
            fault = self.faults.get(api_key)
            result = fault(ctx, request) if fault is not None else None
            # --- client quotas: bound a consumer's fetch, then record and throttle ---
            quotas = self.quotas if self.quotas is not None and self.quotas.active else None
            if quotas is not None:
                quotas.before(ctx, request)
                started = time.perf_counter_ns()
            if result is None:
                result = self.handlers[api_key](ctx, request)
            if quotas is not None:
                result = quotas.after(ctx, request, result, len(frame),
                                      time.perf_counter_ns() - started, connection)
        except (Closed, CloseConnection):
            if observer is not None:
                observer.dropped(token, ctx, "connection closed instead of an answer")
            raise Closed() from None
        except OSError as exc:  # the disk (full, failing), not the request: no traceback
            log.error("%s v%d from %s failed: %s; closing the connection", info.name, version,
                      _peer(connection), exc)
            raise Closed() from None
        except Exception:
            log.exception("%s v%d from %s failed; closing the connection", info.name, version,
                          _peer(connection))
            if observer is not None:
                observer.dropped(token, ctx, "failed; connection closed")
            raise Closed() from None
        if inspect.iscoroutine(result) and getattr(self.handlers[api_key], "eager", False):
            result = _start_eagerly(result)
        if observer is not None:
            return self._observed(observer, token, ctx, result, connection)
        if result is None:
            return None
        if inspect.isawaitable(result):
            future = asyncio.ensure_future(result)
            return _chain(future, lambda response: self.encode_response(ctx, response))
        try:
            return self.encode_response(ctx, result)
        except Exception:
            log.exception("cannot encode the %s v%d response for %s; closing the connection",
                          info.name, version, _peer(connection))
            raise Closed() from None

    def _observed(self, observer, token, ctx, result, connection):
        """The tail of :meth:`handle` when an observer watches: the same, reporting the answer."""
        if inspect.isawaitable(result):
            def finish(response):
                observer.end(token, ctx, response)
                return self.encode_response(ctx, response)

            future = asyncio.ensure_future(result)

            def failed(fut):
                if fut.cancelled() or fut.exception() is not None:
                    observer.dropped(token, ctx, "no answer (cancelled or failed)")
            future.add_done_callback(failed)
            return _chain(future, finish)
        observer.end(token, ctx, result)
        try:
            return self.encode_response(ctx, result)
        except Exception:
            log.exception("cannot encode the %s v%d response for %s; closing the connection",
                          API_BY_KEY[ctx.api_key].name, ctx.api_version, _peer(connection))
            raise Closed() from None

    def encode_response(self, ctx: RequestContext, response) -> list | None:
        if response is None:
            return None
        header_version = messages.response_header_version(ctx.api_key, ctx.api_version)
        header = ResponseHeader(correlation_id=ctx.correlation_id).to_bytes(header_version)
        parts = response.encode(ctx.api_version)
        size = len(header) + sum(records_size(part) for part in parts)
        return [_SIZE.pack(size) + header, *parts]

    def _unsupported_api_versions(self, correlation_id, version, connection):
        """KIP-511: answer an unknown ApiVersions version in v0 format with our ranges."""
        from kbroker.handlers.api_versions import supported_api_versions
        from kbroker.protocol.errors import Errors

        log.debug("ApiVersions v%d from %s is newer than we serve; answering in v0 format",
                 version, _peer(connection))
        response_cls = messages.response_class(API_VERSIONS_KEY)
        response = response_cls(error_code=Errors.UNSUPPORTED_VERSION.code,
                                api_keys=supported_api_versions(response_cls))
        ctx = RequestContext(self.services, API_VERSIONS_KEY, 0, correlation_id, None,
                             _client_host(connection))
        return self.encode_response(ctx, response)


def _start_eagerly(coro):
    """Run a handler's coroutine now, up to its first suspension: its response when it finished
    without waiting, else a future of it (a task that carries on from where it stopped). An
    exception of the first step goes into that future, as a task's would."""
    try:
        yielded = coro.send(None)
    except StopIteration as stop:
        return stop.value
    except Exception as exc:
        failed = asyncio.get_running_loop().create_future()
        failed.set_exception(exc)
        return failed
    return asyncio.ensure_future(_carry_on(coro, yielded))


@types.coroutine
def _carry_on(coro, yielded):
    """The rest of a coroutine whose first step ran already (``yielded`` is what it waits on),
    driven by the task this runs in: values, exceptions and cancellation are passed through
    as ``await`` would."""
    while True:
        try:
            value = yield yielded
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:
            try:
                yielded = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                yielded = coro.send(value)
            except StopIteration as stop:
                return stop.value


def _chain(future: asyncio.Future, transform) -> asyncio.Future:
    """A future of ``transform(result)``, failing if ``future`` fails and cancelling it when
    cancelled."""
    loop = asyncio.get_running_loop()
    out = loop.create_future()

    def done(fut):
        if out.cancelled():
            return
        if fut.cancelled():
            out.cancel()
        elif fut.exception() is not None:
            out.set_exception(fut.exception())
        else:
            try:
                out.set_result(transform(fut.result()))
            except Exception as exc:  # an encoding bug must not leave the client hanging
                out.set_exception(exc)

    def cancelled(out_future):
        # The connection closed (it cancels its queued responses): stop the handler too, so a
        # parked fetch or an acks=all wait lets go of its partitions now, not at its timeout.
        if out_future.cancelled() and not future.done():
            future.cancel()

    future.add_done_callback(done)
    out.add_done_callback(cancelled)
    return out


def _peer(connection) -> str:
    return getattr(connection, "peer", "?")


def _client_host(connection) -> str:
    return _peer(connection).rsplit(":", 1)[0]
