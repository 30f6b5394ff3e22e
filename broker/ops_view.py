"""Value objects the gateways fill in for operators (admin console, JSON API, metrics).

Consumer-group membership lives in the gateways — the Kafka group coordinator, the native
broker's consumer manager — and the console must show both without either gateway importing
the other or the console reaching into their internals. So each gateway exposes a read-only
``group_views()`` returning these neutral records, and the node wiring (rockafka/app.py) hands
those functions to the admin component. Data, not behaviour, like the cluster view: nothing
here holds a reference back into a gateway.

Call ``group_views()`` on the event loop the gateway runs on (its state is owned by that loop).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GroupMember:
    member_id: str                      # Kafka member id, RocketMQ client id
    client_id: str                      # what the client calls itself
    host: str                           # peer address as the gateway sees it
    assignment: tuple[tuple[str, int], ...] = ()  # (topic, queue) the member owns, when the broker knows
    subscriptions: tuple[str, ...] = ()           # "topic" or "topic: expression"
    detail: str = ""                    # protocol-specific, e.g. client language and version


@dataclass(frozen=True)
class GroupView:
    group: str
    protocol: str                       # "kafka" or "remoting"
    state: str                          # Kafka: Empty/Stable/PreparingRebalance/...; remoting: Online
    members: tuple[GroupMember, ...] = field(default=())
    detail: str = ""                    # e.g. Kafka protocol type and assignor, RocketMQ message model
