"""Topics named by name or by id (KIP-516), the way data APIs switch between them by version."""

from __future__ import annotations

from kbroker.protocol.errors import ErrorCode, Errors


def resolve_topic(metadata, by_id: bool, name: str | None, topic_id) -> tuple[str | None, ErrorCode]:
    """The topic's name (None when unknown) and the error to answer for an unknown partition:
    UNKNOWN_TOPIC_ID when the request names topics by id, UNKNOWN_TOPIC_OR_PARTITION otherwise."""
    if by_id:
        meta = metadata.topic_by_id(topic_id)
        return (meta.name if meta is not None else None), Errors.UNKNOWN_TOPIC_ID
    return name, Errors.UNKNOWN_TOPIC_OR_PARTITION
