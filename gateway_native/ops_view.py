"""Read-only operator views of the native broker (broker.ops_view): consumer groups with their
online clients and subscriptions (RocketMQ's ``consumerConnection``), and open connections.
Queue assignment is decided by the clients, so the broker reports none."""

from __future__ import annotations

from typing import Any

from broker.ops_view import GroupMember, GroupView

from .remoting.codes import LanguageCode


def _language(code: int) -> str:
    try:
        return LanguageCode(code).name
    except ValueError:
        return str(code)


def group_views(broker: Any) -> list[GroupView]:
    views = []
    for name, info in sorted(broker.consumers.groups.items()):
        subs = tuple(f"{t}: {s.sub_string}" for t, s in sorted(info.subscriptions.items()))
        members = tuple(
            GroupMember(member_id=cid, client_id=cid, host=ch.conn.remote_addr, subscriptions=subs,
                        detail=f"{_language(ch.language)} v{ch.version}")
            for cid, ch in sorted(info.channels.items()))
        views.append(GroupView(name, "remoting", "Online" if members else "Empty", members,
                               f"{info.message_model} / {info.consume_type} / {info.consume_from_where}"))
    return views


def connection_count(broker: Any) -> int:
    return len(broker.server.connections)


def held_pulls(broker: Any) -> int:
    return broker.pull_hold.held
