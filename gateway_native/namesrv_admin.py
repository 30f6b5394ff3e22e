"""NameServer requests of the operator CLI (mqadmin) beyond routing:

- WIPE_WRITE_PERM_OF_BROKER (205) / ADD_WRITE_PERM_OF_BROKER (327), header ``brokerName``:
  clear / set the write bit of every queue data the broker registered (``wipeWritePerm`` takes a
  broker out of producers' routes before maintenance, ``addWritePerm`` puts it back); answers
  ``wipeTopicCount`` / ``addTopicCount``. As in RocketMQ the change lives in this NameServer's
  route table until the broker registers a changed topic set.
- GET_NAMESRV_CONFIG (319): ``key=value`` lines; UPDATE_NAMESRV_CONFIG (318): ``key=value``
  lines applied to the running NameServer (``scanNotActiveBrokerInterval``,
  ``brokerExpiredMillis``; other keys are kept and listed back, as RocketMQ's Configuration does;
  ``listenPort``/``kvConfigPath``/``configStorePath`` only at start: NO_PERMISSION).
"""

from __future__ import annotations

from typing import Any

import structlog
from engine.topic_config import PERM_WRITE

from .remoting.codes import RequestCode as RC, ResponseCode as R
from .remoting.command import RemotingCommand
from .transport import Connection

log = structlog.get_logger("rockafka.native.namesrv")

_HANDLERS: dict[int, Any] = {}


def reg(code: int):
    def deco(fn: Any) -> Any:
        _HANDLERS[int(code)] = fn
        return fn
    return deco


def register(table: Any) -> None:
    """Add these handlers to the NameServer's processor table (called by namesrv.py)."""
    for code, fn in _HANDLERS.items():
        table.register(code)(fn)


_START_ONLY = {"listenPort", "kvConfigPath", "configStorePath", "rocketmqHome"}


def _set_write_perm(ns: Any, broker_name: str, writable: bool) -> int:
    n = 0
    for qmap in ns.routes.topic_queue_table.values():
        qd = qmap.get(broker_name)
        if qd is None:
            continue
        perm = qd["perm"] | PERM_WRITE if writable else qd["perm"] & ~PERM_WRITE
        if perm != qd["perm"]:
            qd["perm"] = perm
        n += 1
    return n


@reg(RC.WIPE_WRITE_PERM_OF_BROKER)
async def wipe_write_perm(ns: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    name = cmd.require_str("brokerName")
    n = _set_write_perm(ns, name, False)
    log.info("broker_write_perm_wiped", broker_name=name, topics=n, caller=conn.remote_addr)
    return cmd.response(R.SUCCESS, None, {"wipeTopicCount": n})


@reg(RC.ADD_WRITE_PERM_OF_BROKER)
async def add_write_perm(ns: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    name = cmd.require_str("brokerName")
    n = _set_write_perm(ns, name, True)
    log.info("broker_write_perm_added", broker_name=name, topics=n, caller=conn.remote_addr)
    return cmd.response(R.SUCCESS, None, {"addTopicCount": n})


def _config(ns: Any) -> dict[str, str]:
    out = {"listenPort": str(ns.port), "scanNotActiveBrokerInterval": str(ns.scan_interval_ms),
           "brokerExpiredMillis": str(ns.broker_expired_ms), "kvConfigPath": str(ns.kv.path or ""),
           "orderMessageEnable": "false", "clusterTest": "false"}
    out.update(getattr(ns, "extra_config", {}))
    return dict(sorted(out.items()))


@reg(RC.GET_NAMESRV_CONFIG)
async def get_namesrv_config(ns: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    return cmd.response(R.SUCCESS, body="".join(f"{k}={v}\n" for k, v in _config(ns).items()).encode())


@reg(RC.UPDATE_NAMESRV_CONFIG)
async def update_namesrv_config(ns: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    from .processors.broker_admin import parse_properties

    try:
        props = parse_properties((cmd.body or b"").decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return cmd.response(R.SYSTEM_ERROR, f"string2Properties error: {exc}")
    blocked = sorted(set(props) & _START_ONLY)
    if blocked:
        return cmd.response(R.NO_PERMISSION, f"Can not update config in black list: {', '.join(blocked)}")
    try:
        for key, value in props.items():
            if key == "scanNotActiveBrokerInterval":
                ns.scan_interval_ms = max(int(value), 100)
            elif key == "brokerExpiredMillis":
                ns.broker_expired_ms = max(int(value), 1000)
            else:
                ns.extra_config = {**getattr(ns, "extra_config", {}), key: value}
    except ValueError as exc:
        return cmd.response(R.INVALID_PARAMETER, f"bad value: {exc}")
    log.info("namesrv_config_updated", keys=sorted(props), caller=conn.remote_addr)
    return cmd.response(R.SUCCESS)
