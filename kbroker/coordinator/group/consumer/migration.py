"""Online migration between the classic and the consumer protocol (``group.consumer.migration.policy``).

Placeholder: filled in by the migration work (upgrade of a running classic group, classic
members inside a consumer group, downgrade when only classic members remain)."""

from __future__ import annotations

from kbroker.coordinator.group import records as classic_records
from kbroker.protocol.errors import Errors, KafkaError


def classic_tombstone(group_id: str) -> tuple[bytes, None]:
    return classic_records.group_metadata_key(group_id), None


def upgrade(shard, classic, records: list, committed: list):
    raise KafkaError(Errors.GROUP_ID_NOT_FOUND,
                     f"Group {classic.group_id} is not a consumer group.")


def can_downgrade(shard, group, leaving) -> bool:
    return False


def downgrade(shard, group, leaving, joining, response, reason):
    raise NotImplementedError
