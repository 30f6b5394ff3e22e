"""Kafka error codes by name, each with a default message a person can act on.

Owns the numeric error codes the Kafka protocol carries (facts from Apache Kafka's error
table) and the message Rockafka sends when a handler has nothing more specific to say.
Handlers raise ``KafkaError(ErrorCode.X, "specific reason")`` or put ``ErrorCode.X`` into a
response body's ``error_code``; ``ErrorCode.X.message`` is the default text.
"""

from __future__ import annotations

import enum


class ErrorCode(enum.IntEnum):
    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    INVALID_REGULAR_EXPRESSION = 128
    REBOOTSTRAP_REQUIRED = 129
    STREAMS_INVALID_TOPOLOGY = 130
    STREAMS_INVALID_TOPOLOGY_EPOCH = 131
    STREAMS_TOPOLOGY_FENCED = 132

    @property
    def message(self) -> str:
        return default_message(self)

    @property
    def retriable(self) -> bool:
        return self in _RETRIABLE


# Messages written for the errors Rockafka's handlers actually return; the rest fall back to
# the code's name in words.
_MESSAGES: dict[int, str] = {
    -1: "Unexpected server error while handling the request; see the server log.",
    0: "",
    1: "The requested offset is outside the partition's current range of offsets.",
    2: "The record batch is corrupt: bad CRC, inconsistent lengths or an unreadable format.",
    3: "This server has no such topic or partition.",
    4: "The requested fetch size is not valid.",
    5: "The partition has no leader at the moment.",
    6: "This server is not the leader of the partition.",
    7: "The request did not complete before its timeout.",
    10: "The request carries a record batch larger than the maximum message size.",
    12: "The offset commit metadata is longer than the configured maximum.",
    14: "The coordinator is still loading its state; retry shortly.",
    15: "The coordinator is not available.",
    16: "This server is not the coordinator for this group or transactional id.",
    17: "The topic name is not valid (characters, length or reserved name).",
    18: "The produce request is larger than the configured maximum.",
    19: "Not enough in-sync replicas for the requested acks.",
    21: "acks must be -1, 0 or 1.",
    22: "The generation id is not the group's current generation.",
    23: "The member's protocol type or protocols do not match the group's.",
    24: "The group id is empty or not valid.",
    25: "The member id is not known to the group coordinator.",
    26: "The session timeout is outside the broker's allowed range.",
    27: "The group is rebalancing; rejoin the group.",
    28: "The offset commit request is too large.",
    32: "The record timestamp is outside the accepted range.",
    33: "The SASL mechanism is not supported by this server.",
    34: "The SASL request is not valid in the connection's current authentication state.",
    35: "This server does not support the requested API version.",
    36: "The topic already exists.",
    37: "The number of partitions is not valid.",
    38: "The replication factor is not valid.",
    39: "The replica assignment is not valid.",
    40: "The configuration is not valid.",
    41: "This server is not the controller.",
    42: "The request is malformed or not valid for this API version.",
    43: "The message format version does not support this request.",
    44: "The request violates a configured policy.",
    45: "The producer sent a sequence number out of order.",
    46: "The producer sent a sequence number that was already written.",
    47: "The producer epoch is older than the current one; this producer was fenced.",
    48: "The operation is not valid in the transaction's current state.",
    49: "The producer id is not mapped to this transactional id.",
    50: "The transaction timeout is larger than the maximum allowed.",
    51: "Another operation on this transaction is in progress; retry.",
    55: "The operation was not attempted because a related operation failed.",
    56: "The broker failed to read or write its storage.",
    58: "SASL authentication failed.",
    59: "The producer id is not known to this server.",
    68: "The group is not empty.",
    69: "The group does not exist.",
    70: "The fetch session id is not known to this server.",
    71: "The fetch session epoch is not valid.",
    73: "Topic deletion is disabled on this server.",
    74: "The leader epoch in the request is older than the server's.",
    75: "The leader epoch in the request is newer than the server's.",
    76: "The compression type is not supported for this request version.",
    78: "The leader's high watermark has not caught up yet; retry.",
    79: "A member id is required: rejoin with the member id from this response.",
    81: "The group has reached its maximum size.",
    82: "Another member with the same group.instance.id has joined; this one is fenced.",
    86: "The group is still subscribed to the topic.",
    87: "A record in the batch failed validation.",
    88: "Offsets are pending a transaction that is not finished yet.",
    89: "The request exceeded a throttling quota.",
    90: "A newer producer with the same transactional id is active; this one is fenced.",
    91: "The requested resource does not exist.",
    92: "The request names the same resource more than once.",
    100: "This server has no topic with that topic id.",
    103: "The topic id does not match the topic name.",
    105: "The transactional id does not exist.",
    112: "The assignor is not supported by this server.",
    120: "The transaction must be aborted; retry after aborting.",
}

_RETRIABLE = frozenset({
    "CORRUPT_MESSAGE", "UNKNOWN_TOPIC_OR_PARTITION", "LEADER_NOT_AVAILABLE",
    "NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT", "NETWORK_EXCEPTION",
    "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR",
    "NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "CONCURRENT_TRANSACTIONS",
    "KAFKA_STORAGE_ERROR", "FETCH_SESSION_ID_NOT_FOUND", "INVALID_FETCH_SESSION_EPOCH",
    "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH", "OFFSET_NOT_AVAILABLE",
    "UNSTABLE_OFFSET_COMMIT", "THROTTLING_QUOTA_EXCEEDED", "REBALANCE_IN_PROGRESS",
    "UNKNOWN_TOPIC_ID",
})
_RETRIABLE = frozenset(ErrorCode[name] for name in _RETRIABLE)


def default_message(code: int) -> str:
    """The default human message for an error code (also for codes this table lacks)."""
    try:
        code = ErrorCode(code)
    except ValueError:
        return f"Error code {code}."
    text = _MESSAGES.get(int(code))
    if text is not None:
        return text
    return code.name.replace("_", " ").capitalize() + "."


class KafkaError(Exception):
    """An error a handler answers with: a Kafka error code and a specific message."""

    def __init__(self, code: ErrorCode | int, message: str | None = None) -> None:
        self.code = ErrorCode(code) if code in ErrorCode._value2member_map_ else code
        self.message = message or default_message(code)
        super().__init__(f"{getattr(self.code, 'name', self.code)}: {self.message}")
