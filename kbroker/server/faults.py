"""Fault injection for dev and CI: the ``kbroker.fault.<name>`` broker configs made effective.

Rules (grammar in :mod:`kbroker.config.fault_rules`) are set like any dynamic broker config, so
any client's Admin API can drive them. The injector turns the current rules into the
dispatcher's per-api ``faults`` hooks; APIs without a rule keep no hook, so a broker without
rules pays one dict lookup per request, as before.

A matching request, in rule order (sorted by name; the first rule that matches wins):
- ``close``: the connection is dropped without an answer (the client sees a network error);
- ``error``: an answer carrying that error code for every topic-partition (or coordinator key)
  the request names, or in the response's top-level error code; nothing is appended or read;
- ``delay.ms``: the real answer (or the error), that much later;
- ``throttle.ms``: the real answer with ``throttle_time_ms`` set and held back that long, like a
  quota-throttled broker before KIP-219.
``count`` hits are consumed per matching request; a spent rule stays set (DescribeConfigs shows
it) but matches nothing. Rules act only when ``dev.mode`` is true; rules a restart brought back
into a broker no longer in dev mode are ignored with a warning.
"""

from __future__ import annotations

import asyncio
import inspect
import logging

from kbroker.config import ConfigError
from kbroker.config.fault_rules import FaultRule, parse_rule
from kbroker.protocol import messages
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.primitives import EncodeError
from kbroker.server.connection import Closed

log = logging.getLogger("kbroker.faults")


class FaultInjector:
    def __init__(self, config, handlers: dict):
        self.config = config
        self.handlers = handlers
        self.rules: dict[str, FaultRule] = {}
        self.remaining: dict[str, int | None] = {}
        self.hits: dict[str, int] = {}
        self._texts: dict[str, str] = {}

    def reload(self) -> dict:
        """Re-read the rules from the config; the per-api hooks for the dispatcher."""
        names = self.config.fault_rule_names()
        if names and not self.config.get("dev.mode"):
            log.warning("ignoring fault-injection rules %s: the broker is not in dev mode",
                        ", ".join(names))
            names = []
        rules, texts = {}, {}
        for name in names:
            text = self.config.get(name)
            try:
                rules[name] = parse_rule(text)
            except (ValueError, ConfigError) as exc:  # validated when set; kept for safety
                log.warning("ignoring fault rule %s=%r: %s", name, text, exc)
                continue
            texts[name] = text
            if self._texts.get(name) != text:  # a new or changed rule starts afresh
                self.remaining[name] = rules[name].count
                self.hits[name] = 0
                log.info("fault rule %s is active: %s", name, text)
        for gone in self._texts.keys() - texts.keys():
            log.info("fault rule %s removed", gone)
            self.remaining.pop(gone, None)
            self.hits.pop(gone, None)
        self.rules, self._texts = rules, texts
        hooks = {}
        for api_key in {rule.api_key for rule in rules.values()}:
            hooks[api_key] = self._hook([(n, r) for n, r in rules.items() if r.api_key == api_key])
        return hooks

    def status(self, name: str) -> str:
        left = self.remaining.get(name)
        return f"hit {self.hits.get(name, 0)} time(s), " + \
            ("no limit" if left is None else f"{left} left")

    def _hook(self, rules):
        def fault(ctx, request):
            for name, rule in rules:
                if self.remaining.get(name) == 0 or not _matches(rule, ctx, request):
                    continue
                if self.remaining.get(name) is not None:
                    self.remaining[name] -= 1
                self.hits[name] = self.hits.get(name, 0) + 1
                return self._apply(name, rule, ctx, request)
            return None
        return fault

    def _apply(self, name: str, rule: FaultRule, ctx, request):
        what = "closing the connection" if rule.close else \
            f"answering {rule.error_name}" if rule.error is not None else "delaying"
        log.info("fault %s: %s v%d (correlation id %d, client %s): %s (%s)", name,
                 rule.api_name, ctx.api_version, ctx.correlation_id, ctx.client_id, what,
                 self.status(name))
        if rule.close and not rule.delay_ms:
            raise Closed()
        if rule.error is not None and not rule.delay_ms:
            return error_response(ctx, request, rule.error)
        return self._later(rule, ctx, request)

    async def _later(self, rule: FaultRule, ctx, request):
        if rule.delay_ms:
            await asyncio.sleep(rule.delay_ms / 1000)
        if rule.close:
            raise Closed()
        if rule.error is not None:
            return error_response(ctx, request, rule.error)
        response = self.handlers[ctx.api_key](ctx, request)
        if inspect.isawaitable(response):
            response = await response
        if rule.throttle_ms and response is not None:
            if hasattr(response, "throttle_time_ms"):
                response.throttle_time_ms = rule.throttle_ms
            await asyncio.sleep(rule.throttle_ms / 1000)
        return response


# --- which requests a rule matches -------------------------------------------------------------

def _matches(rule: FaultRule, ctx, request) -> bool:
    if rule.client_id is not None and ctx.client_id != rule.client_id:
        return False
    if rule.topic is None and rule.partition is None:
        return True
    for topic, partition in topic_partitions(ctx, request):
        if (rule.topic is None or topic == rule.topic) and \
                (rule.partition is None or partition == rule.partition):
            return True
    return False


def topic_partitions(ctx, request):
    """(topic, partition) pairs a request names, for the APIs that name them (partition None
    when a topic is named without partitions)."""
    for topic, parts in _topics(request):
        name = _topic_name(ctx, topic)
        if not parts:
            yield name, None
        for part in parts:
            yield name, part


def _topics(request):
    """(topic struct, [partition indexes]) for the request shapes of the error-injectable APIs."""
    for field in ("topic_data", "topics"):
        for topic in getattr(request, field, None) or ():
            if isinstance(topic, str):  # Metadata v0-style name lists
                yield topic, []
                continue
            yield topic, _partition_indexes(topic)
    for group in getattr(request, "groups", None) or ():  # OffsetFetch v8+
        for topic in getattr(group, "topics", None) or ():
            yield topic, _partition_indexes(topic)


def _partition_indexes(topic) -> list:
    if getattr(topic, "partition_indexes", None) is not None:
        return list(topic.partition_indexes)
    for field in ("partition_data", "partitions"):
        parts = getattr(topic, field, None)
        if parts:
            return [_index(p) for p in parts]
    return []


def _index(partition) -> int:
    for field in ("index", "partition", "partition_index"):
        value = getattr(partition, field, None)
        if isinstance(value, int):
            return value
    return -1


def _topic_name(ctx, topic) -> str | None:
    if isinstance(topic, str):
        return topic
    name = getattr(topic, "name", None) or getattr(topic, "topic", None)
    if name:
        return name
    topic_id = getattr(topic, "topic_id", None)
    controller = getattr(ctx, "controller", None)
    if topic_id is not None and controller is not None:
        found = controller.image.topic_by_id(topic_id)
        return found.name if found is not None else None
    return None


# --- error answers -----------------------------------------------------------------------------

def error_response(ctx, request, code: int):
    """The response of ``ctx.api_key`` answering every part of ``request`` with error ``code``."""
    R = messages.response_class(ctx.api_key)
    build = _BUILDERS.get(messages.API_BY_KEY[ctx.api_key].name)
    if build is not None:
        return build(R, ctx, request, code)
    response = R(error_code=code)
    # Some versions have no top-level error code (Metadata before v13): the encoder drops it or
    # refuses it, and the client would see a success.
    try:
        carried = _encoded(response, ctx.api_version) != _encoded(R(), ctx.api_version)
    except EncodeError:
        carried = False
    if not carried:
        log.warning("%s v%d has no top-level error code to carry %s; closing the connection "
                    "instead", messages.API_BY_KEY[ctx.api_key].name, ctx.api_version,
                    error_name(code))
        raise Closed() from None
    return response


def _encoded(message, version: int) -> bytes:
    return b"".join(bytes(part) for part in message.encode(version))


def _produce(R, ctx, request, code):
    return R(responses=[R.TopicProduceResponse(
        name=t.name, topic_id=t.topic_id, partition_responses=[
            R.PartitionProduceResponse(index=p.index, error_code=code, base_offset=-1,
                                       log_append_time_ms=-1, log_start_offset=-1)
            for p in t.partition_data]) for t in request.topic_data])


def _fetch(R, ctx, request, code):
    return R(error_code=0, session_id=0, responses=[R.FetchableTopicResponse(
        topic=t.topic, topic_id=t.topic_id, partitions=[
            R.PartitionData(partition_index=p.partition, error_code=code, high_watermark=-1,
                            last_stable_offset=-1, log_start_offset=-1, records=b"")
            for p in t.partitions]) for t in request.topics])


def _list_offsets(R, ctx, request, code):
    return R(topics=[R.ListOffsetsTopicResponse(name=t.name, partitions=[
        R.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=code,
                                       timestamp=-1, offset=-1)
        for p in t.partitions]) for t in request.topics])


def _offset_commit(R, ctx, request, code):
    return R(topics=[R.OffsetCommitResponseTopic(name=t.name, topic_id=t.topic_id, partitions=[
        R.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
        for p in t.partitions]) for t in request.topics])


def _offset_fetch(R, ctx, request, code):
    if ctx.api_version >= 8:  # KIP-709: one result per group
        return R(groups=[R.OffsetFetchResponseGroup(group_id=g.group_id, topics=[], error_code=code)
                         for g in request.groups])
    # v2-7 carry the group's error at the top; v1 clients read it from the partitions.
    topics = [R.OffsetFetchResponseTopic(name=t.name, partitions=[
        R.OffsetFetchResponsePartition(partition_index=i, committed_offset=-1, metadata="",
                                       error_code=code) for i in t.partition_indexes])
        for t in request.topics or ()]
    return R(error_code=code if ctx.api_version >= 2 else 0, topics=topics)


def _find_coordinator(R, ctx, request, code):
    if ctx.api_version >= 4:  # KIP-699: batched keys
        return R(coordinators=[R.Coordinator(key=key, node_id=-1, host="", port=-1,
                                             error_code=code)
                               for key in request.coordinator_keys])
    return R(error_code=code, node_id=-1, host="", port=-1)


_BUILDERS = {"Produce": _produce, "Fetch": _fetch, "ListOffsets": _list_offsets,
             "OffsetCommit": _offset_commit, "OffsetFetch": _offset_fetch,
             "FindCoordinator": _find_coordinator}


def error_name(code: int) -> str:
    return ErrorCode.for_code(code).name
