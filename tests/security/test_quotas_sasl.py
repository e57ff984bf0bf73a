"""Quotas of authenticated users (SASL PLAIN, ACL authorizer): ``kafka-configs.sh`` needs
ALTER_CONFIGS / DESCRIBE_CONFIGS on the cluster, and a ``users`` quota applies to the principal
a producer authenticated as, whatever its client id."""

from __future__ import annotations

from confluent_kafka import Producer
from confluent_kafka.admin import AclOperation, ResourceType

from tests.security.test_acls import acl_broker, add_acls, binding, conf  # noqa: F401
from tests.security.test_acls_kafka_tool import kafka_tool


def kafka_configs(broker, tmp_path, *args: str, user: str = "admin") -> tuple[int, str]:
    return kafka_tool("org.apache.kafka.tools.ConfigCommand", broker, tmp_path, *args, user=user)


def test_quota_apis_need_cluster_configs_permissions(acl_broker, tmp_path):  # noqa: F811
    alter = ("--alter", "--add-config", "producer_byte_rate=1000", "--entity-type", "users",
             "--entity-name", "carol")
    code, out = kafka_configs(acl_broker, tmp_path, *alter, user="alice")
    assert code != 0 and "ClusterAuthorizationException" in out, out
    code, out = kafka_configs(acl_broker, tmp_path, "--describe", "--entity-type", "clients",
                              user="alice")
    assert code != 0 and "ClusterAuthorizationException" in out, out
    add_acls(acl_broker, binding(ResourceType.BROKER, "kafka-cluster", "User:alice",
                                 AclOperation.ALTER_CONFIGS))
    code, out = kafka_configs(acl_broker, tmp_path, *alter, user="alice")
    assert code == 0, out


def test_a_user_quota_throttles_that_principal(acl_broker, tmp_path):  # noqa: F811
    code, out = kafka_configs(acl_broker, tmp_path, "--alter", "--add-config",
                              "producer_byte_rate=1000", "--entity-type", "users",
                              "--entity-name", "admin")
    assert code == 0, out
    throttles = []
    producer = Producer({**conf(acl_broker, "admin"), "client.id": "any-client",
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    for _ in range(20):
        producer.produce("user-quota", b"x" * 1000)
        producer.flush(30)
        if throttles:
            break
    assert throttles and max(throttles) > 0
