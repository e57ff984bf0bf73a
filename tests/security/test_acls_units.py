"""The authorizer's decision rules and the DescribeAcls/DeleteAcls filters, as Kafka's
StandardAuthorizer and AclBindingFilter define them (pure functions; the socket tests are in
test_acls*.py)."""

from __future__ import annotations

from kbroker.security.authorizer import (Acl, Authorizer, Op, PatternType as P, Permission,
                                         ResourceType as T, matches_filter, validate)

ALLOW, DENY = Permission.ALLOW, Permission.DENY


def decide(acls, op, name="orders", principal="User:alice", host="10.0.0.1", rtype=T.TOPIC,
           super_users=(), everyone=False):
    return Authorizer(super_users, everyone).authorize(tuple(acls), principal, host, op, rtype,
                                                       name)


def test_literal_wildcard_prefixed_and_hosts():
    assert decide([Acl(T.TOPIC, "orders", P.LITERAL, "User:alice", "*", Op.READ, ALLOW)], Op.READ)
    assert decide([Acl(T.TOPIC, "*", P.LITERAL, "User:alice", "*", Op.READ, ALLOW)], Op.READ)
    assert decide([Acl(T.TOPIC, "ord", P.PREFIXED, "User:*", "*", Op.READ, ALLOW)], Op.READ)
    assert not decide([Acl(T.TOPIC, "orders-x", P.PREFIXED, "User:alice", "*", Op.READ, ALLOW)],
                      Op.READ)
    assert not decide([Acl(T.TOPIC, "orders", P.LITERAL, "User:alice", "10.0.0.2", Op.READ,
                           ALLOW)], Op.READ)
    assert not decide([Acl(T.GROUP, "orders", P.LITERAL, "User:alice", "*", Op.READ, ALLOW)],
                      Op.READ)


def test_deny_wins_and_implied_operations():
    allow = Acl(T.TOPIC, "orders", P.LITERAL, "User:alice", "*", Op.ALL, ALLOW)
    deny = Acl(T.TOPIC, "ord", P.PREFIXED, "User:*", "10.0.0.1", Op.WRITE, DENY)
    assert decide([allow, deny], Op.READ) and not decide([allow, deny], Op.WRITE)
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert decide([Acl(T.TOPIC, "orders", P.LITERAL, "User:alice", "*", op, ALLOW)],
                      Op.DESCRIBE)
    assert decide([Acl(T.TOPIC, "orders", P.LITERAL, "User:alice", "*", Op.ALTER_CONFIGS, ALLOW)],
                  Op.DESCRIBE_CONFIGS)
    assert not decide([Acl(T.TOPIC, "orders", P.LITERAL, "User:alice", "*", Op.DESCRIBE,
                           ALLOW)], Op.READ)
    # A DENY of DESCRIBE does not deny READ (implication only widens ALLOW).
    assert decide([allow, Acl(T.TOPIC, "orders", P.LITERAL, "User:alice", "*", Op.DESCRIBE,
                              DENY)], Op.READ)


def test_super_users_and_no_acl_found():
    deny = Acl(T.TOPIC, "orders", P.LITERAL, "User:*", "*", Op.ALL, DENY)
    assert decide([deny], Op.READ, super_users=["User:alice"])
    assert not decide([], Op.READ)
    assert decide([], Op.READ, everyone=True)
    # Any ACL on the resource (even someone else's) means "ACLs found".
    assert not decide([Acl(T.TOPIC, "orders", P.LITERAL, "User:bob", "*", Op.READ, ALLOW)],
                      Op.READ, everyone=True)


def test_filters():
    literal = Acl(T.TOPIC, "orders", P.LITERAL, "User:alice", "*", Op.READ, ALLOW)
    prefixed = Acl(T.TOPIC, "ord", P.PREFIXED, "User:alice", "*", Op.READ, ALLOW)
    wildcard = Acl(T.TOPIC, "*", P.LITERAL, "User:alice", "*", Op.READ, ALLOW)
    match = Acl(T.TOPIC, "orders", P.MATCH, None, None, Op.ANY, Permission.ANY)
    assert all(matches_filter(a, match) for a in (literal, prefixed, wildcard))
    exact = Acl(T.TOPIC, "orders", P.LITERAL, None, None, Op.ANY, Permission.ANY)
    assert matches_filter(literal, exact) and not matches_filter(prefixed, exact)
    assert not matches_filter(wildcard, exact)
    anything = Acl(T.ANY, None, P.ANY, None, None, Op.ANY, Permission.ANY)
    assert all(matches_filter(a, anything) for a in (literal, prefixed, wildcard))
    assert not matches_filter(literal, Acl(T.ANY, None, P.ANY, "User:bob", None, Op.ANY,
                                           Permission.ANY))


def test_validation():
    ok = Acl(T.TOPIC, "orders", P.LITERAL, "User:alice", "*", Op.READ, ALLOW)
    assert validate(ok) is None
    assert validate(ok._replace(pattern_type=P.MATCH))
    # As Kafka's controller: any operation on any type is accepted; codes must be concrete.
    assert validate(ok._replace(operation=Op.CLUSTER_ACTION)) is None
    assert validate(ok._replace(operation=Op.ANY))
    assert validate(ok._replace(operation=99))
    assert validate(ok._replace(resource_type=T.ANY))
    assert validate(ok._replace(principal="alice"))
    assert validate(ok._replace(name=""))
    assert validate(ok._replace(permission=Permission.ANY))
