"""The fault-rule grammar (kbroker.config.fault_rules) and the error answers it promises."""

from __future__ import annotations

import pytest

from kbroker.config import BrokerConfig, ConfigError
from kbroker.config.fault_rules import PER_PARTITION_ERROR_APIS, FaultRule, parse_rule
from kbroker.protocol.errors import Errors
from kbroker.server import faults


def test_a_full_rule_parses_with_any_separator():
    rule = parse_rule("api=produce; error=not_leader_or_follower, count=3 topic=t partition=2 "
                      "client.id=app delay.ms=5")
    assert rule == FaultRule(api_key=0, api_name="Produce",
                             error=Errors.NOT_LEADER_OR_FOLLOWER.code,
                             error_name="NOT_LEADER_OR_FOLLOWER", delay_ms=5, count=3, topic="t",
                             partition=2, client_id="app")
    assert parse_rule("api=1 close").close and parse_rule("api=Fetch error=6").error == 6


@pytest.mark.parametrize("text, message", [
    ("error=NONE", "a rule needs api="),
    ("api=Fetch error=NONE", "error=NONE injects nothing"),
    ("api=Fetch close error=NOT_LEADER_OR_FOLLOWER", "close and error exclude each other"),
    ("api=Fetch count=-1 close", "'count' must be a whole number"),
    ("api=Fetch close=maybe", "'close' must be true or false"),
    ("api=Fetch api=Produce close", "field 'api' is given twice"),
    ("api=Fetch delay.ms", "field 'delay.ms' needs a value"),
    ("api=CreateTopics error=UNKNOWN_SERVER_ERROR", "cannot answer CreateTopics with an injected error"),
    ("api=OffsetFecth close", "did you mean 'OffsetFetch'?"),
])
def test_bad_rules_are_refused_in_one_line(text, message):
    with pytest.raises(ValueError, match=message.replace("?", r"\?").replace("(", r"\(")):
        parse_rule(text)


def test_every_api_promised_a_per_partition_error_has_a_builder():
    assert PER_PARTITION_ERROR_APIS == set(faults._BUILDERS)


def test_a_top_level_error_a_version_cannot_carry_closes_the_connection():
    from kbroker.handlers.context import RequestContext
    from kbroker.protocol.messages.metadata import MetadataRequest

    old = RequestContext(None, 3, 12, 1, "c")
    with pytest.raises(faults.Closed):
        faults.error_response(old, MetadataRequest(topics=None), Errors.UNKNOWN_SERVER_ERROR.code)
    new = RequestContext(None, 3, 13, 1, "c")
    response = faults.error_response(new, MetadataRequest(topics=None),
                                     Errors.UNKNOWN_SERVER_ERROR.code)
    assert response.error_code == Errors.UNKNOWN_SERVER_ERROR.code


def test_rules_are_refused_at_start_up_outside_dev_mode():
    with pytest.raises(ConfigError, match="only in dev mode"):
        BrokerConfig({"kbroker.fault.x": "api=Produce close"})
    config = BrokerConfig({"dev.mode": "true", "kbroker.fault.x": "api=Produce close"})
    assert config.fault_rule_names() == ["kbroker.fault.x"]
