"""The one policy model: Kafka's ACL bindings, used for every protocol.

A binding is ``(resource_type, pattern_type, resource_name, principal, host, operation,
permission)`` with Kafka's enum numbers, so the Kafka ACL APIs carry them unchanged and the
remoting gateway maps RocketMQ's PUB/SUB onto WRITE/READ.

Decision rule (Kafka's StandardAuthorizer): a super user may do everything; otherwise a
matching DENY wins over any ALLOW; no matching ALLOW = denied. A binding matches when its
principal equals the request's or is ``User:*``, its host equals the client's or is ``*``,
its operation is the requested one, ALL, or one that implies it (READ, WRITE, DELETE and
ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS — for ALLOW only, as Kafka), and
its pattern matches the resource name (LITERAL equal or ``*``, PREFIXED a prefix).

Invariants: ``AclTable`` is mutated only through ``add``/``remove`` (by the security state's
one writer) and readers see a consistent table (copy-on-write of the index); decisions are
cached per request key until the next change.
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass
from typing import Iterable


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
ANONYMOUS = "User:ANONYMOUS"

# an ALLOW of the key also allows the values (Kafka's AclEntry.supportedOperations rule)
_IMPLIED_BY_ALLOW = {
    Operation.DESCRIBE: (Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER),
    Operation.DESCRIBE_CONFIGS: (Operation.ALTER_CONFIGS,),
}


class AclError(ValueError):
    """A binding or filter that cannot be stored (INVALID_REQUEST with this message)."""


@dataclass(frozen=True)
class AclBinding:
    resource_type: ResourceType
    pattern_type: PatternType
    resource_name: str
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def to_list(self) -> list:
        return [int(self.resource_type), int(self.pattern_type), self.resource_name, self.principal, self.host,
                int(self.operation), int(self.permission)]

    @classmethod
    def from_list(cls, raw: list) -> "AclBinding":
        t, p, name, principal, host, op, perm = raw
        return cls(ResourceType(t), PatternType(p), str(name), str(principal), str(host), Operation(op), Permission(perm))

    def validate(self) -> None:
        """AclError unless this binding is one Kafka would store."""
        if self.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            raise AclError(f"resource type {self.resource_type.name} cannot be stored")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise AclError(f"pattern type {self.pattern_type.name} cannot be stored (LITERAL or PREFIXED)")
        if self.operation in (Operation.UNKNOWN, Operation.ANY):
            raise AclError(f"operation {self.operation.name} cannot be stored")
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            raise AclError(f"permission {self.permission.name} cannot be stored (ALLOW or DENY)")
        if not self.resource_name:
            raise AclError("resource name is empty")
        if self.resource_type == ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            raise AclError(f"the cluster resource is named {CLUSTER_NAME!r}, not {self.resource_name!r}")
        if ":" not in self.principal:
            raise AclError(f"principal {self.principal!r} is not TYPE:NAME (e.g. User:alice)")
        if not self.host:
            raise AclError("host is empty (use * for any host)")

    def describe(self) -> str:
        return (f"{self.permission.name} {self.principal} {self.operation.name} {self.resource_type.name} "
                f"{self.pattern_type.name}:{self.resource_name} from {self.host}")


@dataclass(frozen=True)
class AclFilter:
    """Kafka's AclBindingFilter: None / ANY fields match everything."""

    resource_type: ResourceType = ResourceType.ANY
    pattern_type: PatternType = PatternType.ANY
    resource_name: str | None = None
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and b.resource_type != self.resource_type:
            return False
        if self.operation != Operation.ANY and b.operation != self.operation:
            return False
        if self.permission != Permission.ANY and b.permission != self.permission:
            return False
        if self.principal is not None and b.principal != self.principal:
            return False
        if self.host is not None and b.host != self.host:
            return False
        pt = self.pattern_type
        if pt == PatternType.ANY:
            return self.resource_name is None or b.resource_name == self.resource_name
        if pt == PatternType.MATCH:
            # bindings that would apply to this resource name: equal, wildcard or a prefix of it
            if self.resource_name is None:
                return True
            return (b.resource_name == self.resource_name
                    or (b.pattern_type == PatternType.LITERAL and b.resource_name == WILDCARD)
                    or (b.pattern_type == PatternType.PREFIXED and self.resource_name.startswith(b.resource_name)))
        if b.pattern_type != pt:
            return False
        return self.resource_name is None or b.resource_name == self.resource_name


class AclTable:
    """Bindings, indexed for decisions: literal (type, name) -> bindings; prefixed per type."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._all: dict[AclBinding, None] = {}
        self._literal: dict[tuple[int, str], tuple[AclBinding, ...]] = {}
        self._prefixed: dict[int, tuple[AclBinding, ...]] = {}
        self._cache: dict[tuple, bool] = {}
        self.version = 0

    def __len__(self) -> int:
        return len(self._all)

    def bindings(self) -> list[AclBinding]:
        return list(self._all)

    def add(self, b: AclBinding) -> bool:
        with self._lock:
            if b in self._all:
                return False
            self._all[b] = None
            self._reindex()
            return True

    def remove(self, b: AclBinding) -> bool:
        with self._lock:
            if self._all.pop(b, 0) == 0:
                return False
            self._reindex()
            return True

    def replace(self, bindings: Iterable[AclBinding]) -> None:
        with self._lock:
            self._all = dict.fromkeys(bindings)
            self._reindex()

    def _reindex(self) -> None:
        literal: dict[tuple[int, str], list[AclBinding]] = {}
        prefixed: dict[int, list[AclBinding]] = {}
        for b in self._all:
            if b.pattern_type == PatternType.PREFIXED:
                prefixed.setdefault(int(b.resource_type), []).append(b)
            else:
                literal.setdefault((int(b.resource_type), b.resource_name), []).append(b)
        self._literal = {k: tuple(v) for k, v in literal.items()}
        self._prefixed = {k: tuple(v) for k, v in prefixed.items()}
        self._cache = {}
        self.version += 1

    def matching(self, f: AclFilter) -> list[AclBinding]:
        return [b for b in list(self._all) if f.matches(b)]

    def _candidates(self, rtype: int, name: str) -> list[AclBinding]:
        out = list(self._literal.get((rtype, name), ()))
        if name != WILDCARD:
            out.extend(self._literal.get((rtype, WILDCARD), ()))
        out.extend(b for b in self._prefixed.get(rtype, ()) if name.startswith(b.resource_name))
        return out

    def allowed(self, principal: str, host: str, op: Operation, rtype: ResourceType, name: str) -> bool:
        key = (principal, host, int(op), int(rtype), name)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        cache = self._cache
        decision = self._decide(principal, host, op, rtype, name)
        if len(cache) > 100_000:
            cache.clear()
        cache[key] = decision
        return decision

    def _decide(self, principal: str, host: str, op: Operation, rtype: ResourceType, name: str) -> bool:
        allow = False
        implied_by = _IMPLIED_BY_ALLOW.get(op, ())
        for b in self._candidates(int(rtype), name):
            if b.principal != principal and b.principal != WILDCARD_PRINCIPAL:
                continue
            if b.host != host and b.host != WILDCARD:
                continue
            if b.permission == Permission.DENY:
                if b.operation == op or b.operation == Operation.ALL:
                    return False
                continue
            if b.operation == op or b.operation == Operation.ALL or b.operation in implied_by:
                allow = True
        return allow


def parse_principals(text: str | None) -> frozenset[str]:
    """Kafka's ``super.users``: ``User:a;User:b`` (commas accepted too)."""
    out = set()
    for part in (text or "").replace(",", ";").split(";"):
        part = part.strip()
        if part:
            out.add(part if ":" in part else f"User:{part}")
    return frozenset(out)
