"""DescribeClientQuotas and AlterClientQuotas over a real socket: Kafka's filter semantics
(exact, default, specified, strict), validate_only, removal, and Kafka's errors and messages for
bad input; quotas survive a restart."""

from __future__ import annotations

import pytest

from kbroker.protocol import messages
from kbroker.protocol.messages import API_KEY_BY_NAME
from tests.integration.clients import Wire, running_broker

DESCRIBE = API_KEY_BY_NAME["DescribeClientQuotas"]
ALTER = API_KEY_BY_NAME["AlterClientQuotas"]
INVALID_REQUEST, UNSUPPORTED_VERSION = 42, 35
EXACT, DEFAULT, SPECIFIED = 0, 1, 2


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with running_broker(tmp_path_factory.mktemp("quotas") / "data") as process:
        yield process


def alter(bootstrap, entries, validate_only=False, version=1):
    """entries: [(entity dict, {key: value or None to remove})] -> [(entity, code, message)]"""
    R = messages.request_class(ALTER)
    request = R(validate_only=validate_only, entries=[R.EntryData(
        entity=[R.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
        ops=[R.OpData(key=k, value=0.0 if v is None else v, remove=v is None)
             for k, v in ops.items()]) for entity, ops in entries])
    with Wire(bootstrap) as wire:
        response = wire.call(ALTER, version, request)
    return [({e.entity_type: e.entity_name for e in entry.entity}, entry.error_code,
             entry.error_message) for entry in response.entries]


def describe(bootstrap, components, strict=False, version=1):
    """components: [(type, match type, match)] -> {frozenset(entity items): {key: value}} or
    (error code, message)."""
    R = messages.request_class(DESCRIBE)
    request = R(strict=strict, components=[
        R.ComponentData(entity_type=t, match_type=m, match=s) for t, m, s in components])
    with Wire(bootstrap) as wire:
        response = wire.call(DESCRIBE, version, request)
    if response.error_code:
        return response.error_code, response.error_message
    return {frozenset((e.entity_type, e.entity_name) for e in entry.entity):
            {v.key: v.value for v in entry.values} for entry in response.entries}


ALICE = {"user": "alice"}
ALICE_APP = {"user": "alice", "client-id": "app"}
DEFAULT_USER = {"user": None}
APP = {"client-id": "app"}
DEFAULT_CLIENT = {"client-id": None}
IP = {"ip": "127.0.0.1"}


def key(entity):
    return frozenset(entity.items())


def test_alter_then_describe_with_kafkas_filters(broker):
    b = broker.bootstrap
    results = alter(b, [(ALICE, {"producer_byte_rate": 1024, "consumer_byte_rate": 2048,
                                 "request_percentage": 50}),
                        (ALICE_APP, {"producer_byte_rate": 10}),
                        (DEFAULT_USER, {"consumer_byte_rate": 99}),
                        (APP, {"request_percentage": 12.5}),
                        (DEFAULT_CLIENT, {"producer_byte_rate": 7}),
                        (IP, {"connection_creation_rate": 100})])
    assert [code for _, code, _ in results] == [0] * 6
    everything = describe(b, [])
    assert everything[key(ALICE)] == {"producer_byte_rate": 1024.0,
                                      "consumer_byte_rate": 2048.0, "request_percentage": 50.0}
    assert len(everything) == 6
    # EXACT user alice, not strict: alice and alice+app; strict: only alice.
    assert set(describe(b, [("user", EXACT, "alice")])) == {key(ALICE), key(ALICE_APP)}
    assert set(describe(b, [("user", EXACT, "alice")], strict=True)) == {key(ALICE)}
    # DEFAULT user.
    assert set(describe(b, [("user", DEFAULT, None)])) == {key(DEFAULT_USER)}
    # SPECIFIED client-id matches any client-id entity, the default one included.
    assert set(describe(b, [("client-id", SPECIFIED, None)])) == {
        key(ALICE_APP), key(APP), key(DEFAULT_CLIENT)}
    assert set(describe(b, [("client-id", SPECIFIED, None)], strict=True)) == {
        key(APP), key(DEFAULT_CLIENT)}
    assert set(describe(b, [("user", EXACT, "alice"), ("client-id", SPECIFIED, None)])) == {
        key(ALICE_APP)}
    assert set(describe(b, [("ip", SPECIFIED, None)])) == {key(IP)}
    assert describe(b, [], strict=True) == {}
    assert describe(b, [("user", EXACT, "nobody")]) == {}
    # v0 (not flexible) reads the same.
    assert set(describe(b, [("user", EXACT, "alice")], version=0)) == {key(ALICE), key(ALICE_APP)}

    # validate_only changes nothing; removing a key removes only it; the last key, the entity.
    assert alter(b, [(ALICE, {"producer_byte_rate": 1})], validate_only=True)[0][1] == 0
    assert describe(b, [("user", EXACT, "alice")], strict=True)[key(ALICE)][
        "producer_byte_rate"] == 1024.0
    assert alter(b, [(ALICE, {"producer_byte_rate": None, "no_such_key_set": None})])[0][1] == 0
    assert describe(b, [("user", EXACT, "alice")], strict=True)[key(ALICE)] == {
        "consumer_byte_rate": 2048.0, "request_percentage": 50.0}
    assert alter(b, [(ALICE_APP, {"producer_byte_rate": None}), (IP, {
        "connection_creation_rate": None})])[0][1] == 0
    assert set(describe(b, [("user", EXACT, "alice")])) == {key(ALICE)}
    assert describe(b, [("ip", SPECIFIED, None)]) == {}


@pytest.mark.parametrize("components, error, message", [
    ([("user", EXACT, "a"), ("user", DEFAULT, None)], INVALID_REQUEST,
     "Entity type user cannot appear more than once in the filter."),
    ([("", EXACT, "a")], INVALID_REQUEST, "Invalid empty entity type."),
    ([("group", EXACT, "a")], UNSUPPORTED_VERSION, "Unsupported entity type group"),
    ([("user", EXACT, None)], INVALID_REQUEST,
     "Request specified MATCH_TYPE_EXACT, but set match string to null."),
    ([("user", DEFAULT, "x")], INVALID_REQUEST,
     "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
    ([("user", SPECIFIED, "x")], INVALID_REQUEST,
     "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
    ([("user", 7, None)], INVALID_REQUEST, "Unknown match type 7"),
    ([("ip", SPECIFIED, None), ("user", EXACT, "a")], INVALID_REQUEST,
     "Invalid entity filter component combination. IP filter component should not be used "
     "with user or clientId filter component."),
])
def test_describe_refuses_bad_filters(broker, components, error, message):
    assert describe(broker.bootstrap, components) == (error, message)


@pytest.mark.parametrize("entity, ops, message", [
    ({}, {"producer_byte_rate": 1}, "Invalid empty client quota entity"),
    ({"group": "g"}, {"producer_byte_rate": 1}, "Unhandled client quota entity type: group"),
    ({"user": ""}, {"producer_byte_rate": 1}, "Empty user not supported"),
    ({"ip": "127.0.0.1", "user": "a"}, {"connection_creation_rate": 1},
     "Invalid empty client quota entity"),
    ({"ip": "no-such-host.invalid"}, {"connection_creation_rate": 1},
     "no-such-host.invalid is not a valid IP or resolvable host."),
    (ALICE, {"SCRAM-SHA-256": 1}, "Invalid configuration key SCRAM-SHA-256"),
    (ALICE, {"connection_creation_rate": 1}, "Invalid configuration key connection_creation_rate"),
    (IP, {"producer_byte_rate": 1}, "Invalid configuration key producer_byte_rate"),
    (ALICE, {"producer_byte_rate": 1.5}, "Configuration producer_byte_rate must be a Long value"),
    (ALICE, {"controller_mutation_rate": 10},
     "controller_mutation_rate (KIP-599 controller mutation quotas) is not implemented by "
     "kbroker yet"),
    (IP, {"connection_creation_rate": -1},
     "Invalid value -1 for configuration connection_creation_rate: Value must be at least 0"),
])
def test_alter_refuses_bad_entities_and_keys(broker, entity, ops, message):
    b = broker.bootstrap
    before = describe(b, [])
    ((_, code, text),) = alter(b, [(entity, ops), ])
    assert (code, text) == (INVALID_REQUEST, message)
    assert describe(b, []) == before


def test_alter_refuses_a_duplicate_type_key_or_entity_and_applies_the_rest(broker):
    b = broker.bootstrap
    R = messages.request_class(ALTER)
    request = R(validate_only=False, entries=[
        R.EntryData(entity=[R.EntityData(entity_type="user", entity_name="x"),
                            R.EntityData(entity_type="user", entity_name="y")],
                    ops=[R.OpData(key="producer_byte_rate", value=1.0)]),
        R.EntryData(entity=[R.EntityData(entity_type="user", entity_name="dup-key")],
                    ops=[R.OpData(key="producer_byte_rate", value=1.0),
                         R.OpData(key="producer_byte_rate", value=2.0)]),
        R.EntryData(entity=[R.EntityData(entity_type="client-id", entity_name="twice")],
                    ops=[R.OpData(key="producer_byte_rate", value=1.0)]),
        R.EntryData(entity=[R.EntityData(entity_type="client-id", entity_name="twice")],
                    ops=[R.OpData(key="consumer_byte_rate", value=1.0)]),
        R.EntryData(entity=[R.EntityData(entity_type="client-id", entity_name="good")],
                    ops=[R.OpData(key="consumer_byte_rate", value=5.0)])])
    with Wire(b) as wire:
        entries = wire.call(ALTER, 1, request).entries
    got = [(e.error_code, e.error_message) for e in entries]
    assert got == [
        (INVALID_REQUEST, "Invalid empty client quota entity, duplicate entity entry user"),
        (INVALID_REQUEST, "Duplicate quota key producer_byte_rate not updating quota for this "
                          "entity ClientQuotaEntity(entries={user=dup-key})"),
        (INVALID_REQUEST, "Ignoring duplicate entity ClientQuotaEntity(entries={client-id=twice})"),
        (0, None)]
    assert describe(b, [("client-id", EXACT, "good")]) == {
        key({"client-id": "good"}): {"consumer_byte_rate": 5.0}}
    assert describe(b, [("client-id", EXACT, "twice")]) == {}
    assert describe(b, [("user", EXACT, "dup-key")]) == {}
    alter(b, [({"client-id": "good"}, {"consumer_byte_rate": None})])


def test_quotas_survive_a_restart(broker_factory, tmp_path):
    process = broker_factory(data_dir=tmp_path / "data")
    assert alter(process.bootstrap, [(ALICE_APP, {"producer_byte_rate": 4096})])[0][1] == 0
    process.stop(timeout=10)
    process = broker_factory(data_dir=tmp_path / "data")
    assert describe(process.bootstrap, []) == {key(ALICE_APP): {"producer_byte_rate": 4096.0}}


def test_an_ip_entity_may_name_a_host_that_resolves(broker):
    b = broker.bootstrap
    assert alter(b, [({"ip": "localhost"}, {"connection_creation_rate": 50})]) == [
        ({"ip": "localhost"}, 0, None)]
    assert describe(b, [("ip", EXACT, "localhost")]) == {
        key({"ip": "localhost"}): {"connection_creation_rate": 50.0}}
    assert alter(b, [({"ip": "localhost"}, {"connection_creation_rate": None})])[0][1] == 0
