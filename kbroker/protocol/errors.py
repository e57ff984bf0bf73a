"""Kafka error codes, and the exception that carries one.

The table mirrors ``org.apache.kafka.common.protocol.Errors`` of Apache Kafka 4.4 (codes -1..136):
the code, the constant's name, the default message (the message of the exception class Kafka maps
the code to), and whether that exception extends ``RetriableException`` (clients retry those on
their own). Codes never change meaning once assigned, so a client of any version agrees with it.

Usage::

    raise KafkaError(Errors.MESSAGE_TOO_LARGE, "batch of 1200000 bytes exceeds max.message.bytes")
    raise Errors.UNKNOWN_TOPIC_OR_PARTITION.exception()       # the default message
    ErrorCode.for_code(6) is Errors.NOT_LEADER_OR_FOLLOWER     # unknown codes -> UNKNOWN_SERVER_ERROR
    ErrorCode.for_name("INVALID_RECORD").code == 87

Sans-I/O: nothing here touches sockets or the event loop.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["ErrorCode", "Errors", "KafkaError"]

RETRY = True
NO_RETRY = False


class ErrorCode(IntEnum):
    """One Kafka error code. The member is the int sent on the wire (``int(e) == e.code``)."""

    retriable: bool
    message: str

    def __new__(cls, code: int, retriable: bool, message: str) -> ErrorCode:
        member = int.__new__(cls, code)
        member._value_ = code
        member.retriable = retriable
        member.message = message
        return member

    # name = code, retriable, default message
    UNKNOWN_SERVER_ERROR = -1, NO_RETRY, "The server experienced an unexpected error when processing the request."
    NONE = 0, NO_RETRY, ""
    OFFSET_OUT_OF_RANGE = 1, NO_RETRY, "The requested offset is not within the range of offsets maintained by the server."
    CORRUPT_MESSAGE = 2, RETRY, "This message has failed its CRC checksum, exceeds the valid size, has a null key for a compacted topic, or is otherwise corrupt."
    UNKNOWN_TOPIC_OR_PARTITION = 3, RETRY, "This server does not host this topic-partition."
    INVALID_FETCH_SIZE = 4, NO_RETRY, "The requested fetch size is invalid."
    LEADER_NOT_AVAILABLE = 5, RETRY, "There is no leader for this topic-partition as we are in the middle of a leadership election."
    NOT_LEADER_OR_FOLLOWER = 6, RETRY, "For requests intended only for the leader, this error indicates that the broker is not the current leader. For requests intended for any replica, this error indicates that the broker is not a replica of the topic partition."
    REQUEST_TIMED_OUT = 7, RETRY, "The request timed out."
    BROKER_NOT_AVAILABLE = 8, NO_RETRY, "The broker is not available."
    REPLICA_NOT_AVAILABLE = 9, RETRY, "The replica is not available for the requested topic-partition. Produce/Fetch requests and other requests intended only for the leader or follower return NOT_LEADER_OR_FOLLOWER if the broker is not a replica of the topic-partition."
    MESSAGE_TOO_LARGE = 10, NO_RETRY, "The request included a message larger than the max message size the server will accept."
    STALE_CONTROLLER_EPOCH = 11, NO_RETRY, "The controller moved to another broker."
    OFFSET_METADATA_TOO_LARGE = 12, NO_RETRY, "The metadata field of the offset request was too large."
    NETWORK_EXCEPTION = 13, RETRY, "The server disconnected before a response was received."
    COORDINATOR_LOAD_IN_PROGRESS = 14, RETRY, "The coordinator is loading and hence can't process requests."
    COORDINATOR_NOT_AVAILABLE = 15, RETRY, "The coordinator is not available."
    NOT_COORDINATOR = 16, RETRY, "This is not the correct coordinator."
    INVALID_TOPIC_EXCEPTION = 17, NO_RETRY, "The request attempted to perform an operation on an invalid topic."
    RECORD_LIST_TOO_LARGE = 18, NO_RETRY, "The request included message batch larger than the configured segment size on the server."
    NOT_ENOUGH_REPLICAS = 19, RETRY, "Messages are rejected since there are fewer in-sync replicas than required."
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20, RETRY, "Messages are written to the log, but to fewer in-sync replicas than required."
    INVALID_REQUIRED_ACKS = 21, NO_RETRY, "Produce request specified an invalid value for required acks."
    ILLEGAL_GENERATION = 22, NO_RETRY, "Specified group generation id is not valid."
    INCONSISTENT_GROUP_PROTOCOL = 23, NO_RETRY, "The group member's supported protocols are incompatible with those of existing members or first group member tried to join with empty protocol type or empty protocol list."
    INVALID_GROUP_ID = 24, NO_RETRY, "The group id is invalid."
    UNKNOWN_MEMBER_ID = 25, NO_RETRY, "The coordinator is not aware of this member."
    INVALID_SESSION_TIMEOUT = 26, NO_RETRY, "The session timeout is not within the range allowed by the broker (as configured by group.min.session.timeout.ms and group.max.session.timeout.ms)."
    REBALANCE_IN_PROGRESS = 27, NO_RETRY, "The group is rebalancing, so a rejoin is needed."
    INVALID_COMMIT_OFFSET_SIZE = 28, NO_RETRY, "The committing offset data size is not valid."
    TOPIC_AUTHORIZATION_FAILED = 29, NO_RETRY, "Topic authorization failed."
    GROUP_AUTHORIZATION_FAILED = 30, NO_RETRY, "Group authorization failed."
    CLUSTER_AUTHORIZATION_FAILED = 31, NO_RETRY, "Cluster authorization failed."
    INVALID_TIMESTAMP = 32, NO_RETRY, "The timestamp of the message is out of acceptable range."
    UNSUPPORTED_SASL_MECHANISM = 33, NO_RETRY, "The broker does not support the requested SASL mechanism."
    ILLEGAL_SASL_STATE = 34, NO_RETRY, "Request is not valid given the current SASL state."
    UNSUPPORTED_VERSION = 35, NO_RETRY, "The version of API is not supported."
    TOPIC_ALREADY_EXISTS = 36, NO_RETRY, "Topic with this name already exists."
    INVALID_PARTITIONS = 37, NO_RETRY, "Number of partitions is below 1."
    INVALID_REPLICATION_FACTOR = 38, NO_RETRY, "Replication factor is below 1 or larger than the number of available brokers."
    INVALID_REPLICA_ASSIGNMENT = 39, NO_RETRY, "Replica assignment is invalid."
    INVALID_CONFIG = 40, NO_RETRY, "Configuration is invalid."
    NOT_CONTROLLER = 41, RETRY, "This is not the correct controller for this cluster."
    INVALID_REQUEST = 42, NO_RETRY, "This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details."
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43, NO_RETRY, "The message format version on the broker does not support the request."
    POLICY_VIOLATION = 44, NO_RETRY, "Request parameters do not satisfy the configured policy."
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45, NO_RETRY, "The broker received an out of order sequence number."
    DUPLICATE_SEQUENCE_NUMBER = 46, NO_RETRY, "The broker received a duplicate sequence number."
    INVALID_PRODUCER_EPOCH = 47, NO_RETRY, "Producer attempted to produce with an old epoch."
    INVALID_TXN_STATE = 48, NO_RETRY, "The producer attempted a transactional operation in an invalid state."
    INVALID_PRODUCER_ID_MAPPING = 49, NO_RETRY, "The producer attempted to use a producer id which is not currently assigned to its transactional id."
    INVALID_TRANSACTION_TIMEOUT = 50, NO_RETRY, "The transaction timeout is larger than the maximum value allowed by the broker (as configured by transaction.max.timeout.ms)."
    CONCURRENT_TRANSACTIONS = 51, RETRY, "The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing."
    TRANSACTION_COORDINATOR_FENCED = 52, NO_RETRY, "Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current coordinator for a given producer."
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53, NO_RETRY, "Transactional Id authorization failed."
    SECURITY_DISABLED = 54, NO_RETRY, "Security features are disabled."
    OPERATION_NOT_ATTEMPTED = 55, NO_RETRY, "The broker did not attempt to execute this operation. This may happen for batched RPCs where some operations in the batch failed, causing the broker to respond without trying the rest."
    KAFKA_STORAGE_ERROR = 56, RETRY, "Disk error when trying to access log file on the disk."
    LOG_DIR_NOT_FOUND = 57, NO_RETRY, "The user-specified log directory is not found in the broker config."
    SASL_AUTHENTICATION_FAILED = 58, NO_RETRY, "SASL Authentication failed."
    UNKNOWN_PRODUCER_ID = 59, NO_RETRY, "This exception is raised by the broker if it could not locate the producer metadata associated with the producerId in question. This could happen if, for instance, the producer's records were deleted because their retention time had elapsed. Once the last records of the producerId are removed, the producer's metadata is removed from the broker, and future appends by the producer will return this exception."
    REASSIGNMENT_IN_PROGRESS = 60, NO_RETRY, "A partition reassignment is in progress."
    DELEGATION_TOKEN_AUTH_DISABLED = 61, NO_RETRY, "Delegation Token feature is not enabled."
    DELEGATION_TOKEN_NOT_FOUND = 62, NO_RETRY, "Delegation Token is not found on server."
    DELEGATION_TOKEN_OWNER_MISMATCH = 63, NO_RETRY, "Specified Principal is not valid Owner/Renewer."
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64, NO_RETRY, "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token authenticated channels."
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65, NO_RETRY, "Delegation Token authorization failed."
    DELEGATION_TOKEN_EXPIRED = 66, NO_RETRY, "Delegation Token is expired."
    INVALID_PRINCIPAL_TYPE = 67, NO_RETRY, "Supplied principalType is not supported."
    NON_EMPTY_GROUP = 68, NO_RETRY, "The group is not empty."
    GROUP_ID_NOT_FOUND = 69, NO_RETRY, "The group id does not exist."
    FETCH_SESSION_ID_NOT_FOUND = 70, RETRY, "The fetch session ID was not found."
    INVALID_FETCH_SESSION_EPOCH = 71, RETRY, "The fetch session epoch is invalid."
    LISTENER_NOT_FOUND = 72, RETRY, "There is no listener on the leader broker that matches the listener on which metadata request was processed."
    TOPIC_DELETION_DISABLED = 73, NO_RETRY, "Topic deletion is disabled."
    FENCED_LEADER_EPOCH = 74, RETRY, "The leader epoch in the request is older than the epoch on the broker."
    UNKNOWN_LEADER_EPOCH = 75, RETRY, "The leader epoch in the request is newer than the epoch on the broker."
    UNSUPPORTED_COMPRESSION_TYPE = 76, NO_RETRY, "The requesting client does not support the compression type of given partition."
    STALE_BROKER_EPOCH = 77, NO_RETRY, "Broker epoch has changed."
    OFFSET_NOT_AVAILABLE = 78, RETRY, "The leader high watermark has not caught up from a recent leader election so the offsets cannot be guaranteed to be monotonically increasing."
    MEMBER_ID_REQUIRED = 79, NO_RETRY, "The group member needs to have a valid member id before actually entering a consumer group."
    PREFERRED_LEADER_NOT_AVAILABLE = 80, RETRY, "The preferred leader was not available."
    GROUP_MAX_SIZE_REACHED = 81, NO_RETRY, "The group has reached its maximum size."
    FENCED_INSTANCE_ID = 82, NO_RETRY, "The broker rejected this static consumer since another consumer with the same group.instance.id has registered with a different member.id."
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83, RETRY, "Eligible topic partition leaders are not available."
    ELECTION_NOT_NEEDED = 84, RETRY, "Leader election not needed for topic partition."
    NO_REASSIGNMENT_IN_PROGRESS = 85, NO_RETRY, "No partition reassignment is in progress."
    GROUP_SUBSCRIBED_TO_TOPIC = 86, NO_RETRY, "Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it."
    INVALID_RECORD = 87, NO_RETRY, "This record has failed the validation on broker and hence will be rejected."
    UNSTABLE_OFFSET_COMMIT = 88, RETRY, "There are unstable offsets that need to be cleared."
    THROTTLING_QUOTA_EXCEEDED = 89, RETRY, "The throttling quota has been exceeded."
    PRODUCER_FENCED = 90, NO_RETRY, "There is a newer producer with the same transactionalId which fences the current one."
    RESOURCE_NOT_FOUND = 91, NO_RETRY, "A request illegally referred to a resource that does not exist."
    DUPLICATE_RESOURCE = 92, NO_RETRY, "A request illegally referred to the same resource twice."
    UNACCEPTABLE_CREDENTIAL = 93, NO_RETRY, "Requested credential would not meet criteria for acceptability."
    INCONSISTENT_VOTER_SET = 94, NO_RETRY, "Indicates that the either the sender or recipient of a voter-only request is not one of the expected voters."
    INVALID_UPDATE_VERSION = 95, NO_RETRY, "The given update version was invalid."
    FEATURE_UPDATE_FAILED = 96, NO_RETRY, "Unable to update finalized features due to an unexpected server error."
    PRINCIPAL_DESERIALIZATION_FAILURE = 97, NO_RETRY, "Request principal deserialization failed during forwarding. This indicates an internal error on the broker cluster security setup."
    SNAPSHOT_NOT_FOUND = 98, NO_RETRY, "Requested snapshot was not found."
    POSITION_OUT_OF_RANGE = 99, NO_RETRY, "Requested position is not greater than or equal to zero, and less than the size of the snapshot."
    UNKNOWN_TOPIC_ID = 100, RETRY, "This server does not host this topic ID."
    DUPLICATE_BROKER_REGISTRATION = 101, NO_RETRY, "This broker ID is already in use."
    BROKER_ID_NOT_REGISTERED = 102, NO_RETRY, "The given broker ID was not registered."
    INCONSISTENT_TOPIC_ID = 103, RETRY, "The log's topic ID did not match the topic ID in the request."
    INCONSISTENT_CLUSTER_ID = 104, NO_RETRY, "The clusterId in the request does not match that found on the server."
    TRANSACTIONAL_ID_NOT_FOUND = 105, NO_RETRY, "The transactionalId could not be found."
    FETCH_SESSION_TOPIC_ID_ERROR = 106, RETRY, "The fetch session encountered inconsistent topic ID usage."
    INELIGIBLE_REPLICA = 107, NO_RETRY, "The new ISR contains at least one ineligible replica."
    NEW_LEADER_ELECTED = 108, NO_RETRY, "The AlterPartition request successfully updated the partition state but the leader has changed."
    OFFSET_MOVED_TO_TIERED_STORAGE = 109, NO_RETRY, "The requested offset is moved to tiered storage."
    FENCED_MEMBER_EPOCH = 110, NO_RETRY, "The member epoch is fenced by the group coordinator. The member must abandon all its partitions and rejoin."
    UNRELEASED_INSTANCE_ID = 111, NO_RETRY, "The instance ID is still used by another member in the consumer group. That member must leave first."
    UNSUPPORTED_ASSIGNOR = 112, NO_RETRY, "The assignor or its version range is not supported by the consumer group."
    STALE_MEMBER_EPOCH = 113, NO_RETRY, "The member epoch is stale. The member must retry after receiving its updated member epoch via the ConsumerGroupHeartbeat API."
    MISMATCHED_ENDPOINT_TYPE = 114, NO_RETRY, "The request was sent to an endpoint of the wrong type."
    UNSUPPORTED_ENDPOINT_TYPE = 115, NO_RETRY, "This endpoint type is not supported yet."
    UNKNOWN_CONTROLLER_ID = 116, NO_RETRY, "This controller ID is not known."
    UNKNOWN_SUBSCRIPTION_ID = 117, NO_RETRY, "Client sent a push telemetry request with an invalid or outdated subscription ID."
    TELEMETRY_TOO_LARGE = 118, NO_RETRY, "Client sent a push telemetry request larger than the maximum size the broker will accept."
    INVALID_REGISTRATION = 119, NO_RETRY, "The controller has considered the broker registration to be invalid."
    TRANSACTION_ABORTABLE = 120, NO_RETRY, "The server encountered an error with the transaction. The client can abort the transaction to continue using this transactional ID."
    INVALID_RECORD_STATE = 121, NO_RETRY, "The record state is invalid. The acknowledgement of delivery could not be completed."
    SHARE_SESSION_NOT_FOUND = 122, RETRY, "The share session was not found."
    INVALID_SHARE_SESSION_EPOCH = 123, RETRY, "The share session epoch is invalid."
    FENCED_STATE_EPOCH = 124, NO_RETRY, "The coordinator rejected the request because the state epoch did not match."
    INVALID_VOTER_KEY = 125, NO_RETRY, "The voter key doesn't match the receiving replica's key."
    DUPLICATE_VOTER = 126, NO_RETRY, "The voter is already part of the set of voters."
    VOTER_NOT_FOUND = 127, NO_RETRY, "The voter is not part of the set of voters."
    INVALID_REGULAR_EXPRESSION = 128, NO_RETRY, "The regular expression is not valid."
    REBOOTSTRAP_REQUIRED = 129, NO_RETRY, "Client metadata is stale. The client should rebootstrap to obtain new metadata."
    STREAMS_INVALID_TOPOLOGY = 130, NO_RETRY, "The supplied topology is invalid."
    STREAMS_INVALID_TOPOLOGY_EPOCH = 131, NO_RETRY, "The supplied topology epoch is invalid."
    STREAMS_TOPOLOGY_FENCED = 132, NO_RETRY, "The supplied topology epoch is outdated."
    SHARE_SESSION_LIMIT_REACHED = 133, RETRY, "The limit of share sessions has been reached."
    GROUP_DELETION_FAILED = 134, NO_RETRY, "DeleteGroups could not complete; see the error message on the per-group result for details."
    STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED = 135, NO_RETRY, "The broker could not process the topology description update; see the error message for details."
    CONTROLLER_ID_NOT_REGISTERED = 136, NO_RETRY, "The given controller ID was not registered."

    @property
    def code(self) -> int:
        return self._value_

    @classmethod
    def for_code(cls, code: int) -> ErrorCode:
        """The error for a wire code; codes this table lacks map to UNKNOWN_SERVER_ERROR, as in Kafka."""
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN_SERVER_ERROR

    @classmethod
    def for_name(cls, name: str) -> ErrorCode:
        """The error for a constant name such as ``"NOT_LEADER_OR_FOLLOWER"``; KeyError if unknown."""
        return cls[name]

    def exception(self, message: str | None = None) -> KafkaError:
        """A KafkaError for this code, to ``raise``; without a message it uses the default one."""
        return KafkaError(self, message)

    def __repr__(self) -> str:
        return f"<ErrorCode {self.name}={self._value_}>"


# Kafka's own spelling: ``Errors.NOT_COORDINATOR``.
Errors = ErrorCode


class KafkaError(Exception):
    """An operation failed with a Kafka error; handlers turn it into the response's error code.

    ``message`` is the detail for the response's error-message field (where the API has one) and
    the broker log; it defaults to the code's standard message.
    """

    def __init__(self, error: ErrorCode | int, message: str | None = None) -> None:
        if not isinstance(error, ErrorCode):
            error = ErrorCode.for_code(error)
        self.error = error
        self.message = message if message is not None else error.message
        super().__init__(self.message)

    @property
    def code(self) -> int:
        return self.error.code

    @property
    def retriable(self) -> bool:
        return self.error.retriable

    def __str__(self) -> str:
        return f"{self.error.name}: {self.message}" if self.message else self.error.name

    def __repr__(self) -> str:
        return f"KafkaError({self.error.name}, {self.message!r})"
