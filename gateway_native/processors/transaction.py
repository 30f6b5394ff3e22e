"""END_TRANSACTION (37) and the broker-initiated CHECK_TRANSACTION_STATE (39).

Behaviour (RocketMQ's ``EndTransactionProcessor`` and ``TransactionalMessageCheckService``):
- a prepared send (sysflag TRANSACTION_PREPARED_TYPE) is stored by ``send.py`` through
  ``engine.transaction.TransactionalMessageService.prepare`` into RMQ_SYS_TRANS_HALF_TOPIC; the
  answer carries the half message's queue offset (the producer's ``tranStateTableOffset``) and
  its offset message id (the commitlog offset), which END_TRANSACTION sends back;
- END_TRANSACTION ``commitOrRollback`` 8 commits (the message appears in its real topic and
  queue), 12 rolls back, 0 (unknown) leaves the half message to the check-back; the producer
  group in the header must be the one that sent the half message (else SYSTEM_ERROR);
- ``check_loop`` runs every ``transactionCheckInterval`` ms from broker start (so transactions
  left open before a restart are checked again): half messages older than
  ``transactionTimeOut`` (or their CHECK_IMMUNITY_TIME_IN_SECONDS) are renewed and one live
  producer connection of their group gets CHECK_TRANSACTION_STATE (oneway, header
  ``tranStateTableOffset, commitLogOffset, msgId, transactionId, offsetMsgId``, body = the
  message encoded as stored with its real topic and queue). After ``transactionCheckMax``
  checks the half message is rolled back.

END_TRANSACTION names no topic: the caller must be allowed to WRITE the half message's real
topic (NO_PERMISSION otherwise), so a signed user cannot resolve another topic's transactions.

Not implemented: a slave answering END_TRANSACTION (no slaves serve writes here).
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import structlog

from engine.message import encode_properties, encode_unit
from engine import transaction as engine_transaction
from engine.transaction import CheckRequest, TransactionalMessageService, TransactionError

from ..remoting.codes import RequestCode as RC, ResponseCode as R
from ..remoting.command import RemotingCommand
from ..transport import Connection, ConnectionClosedError
from ..security import Op, processor_check
from . import BROKER_PROCESSORS

log = structlog.get_logger("rockafka.native.transaction")

COMMIT = 0x8
ROLLBACK = 0xC
UNKNOWN = 0x0


def service(broker: Any) -> TransactionalMessageService:
    """The store's transaction service, shared with the other gateways; the first call
    registers this broker's producers as check-back targets."""
    svc = engine_transaction.for_store(broker.store)
    if getattr(broker, "transactions", None) is not svc:
        broker.transactions = svc
        svc.check_handlers.insert(0, lambda req: ask_producer(broker, req))
    return svc


@BROKER_PROCESSORS.register(RC.END_TRANSACTION)
async def end_transaction(broker: Any, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
    kind = cmd.get_int("commitOrRollback", -1)
    commit_log_offset = cmd.get_int("commitLogOffset")
    queue_offset = cmd.get_int("tranStateTableOffset")
    if kind not in (COMMIT, ROLLBACK, UNKNOWN):
        return cmd.response(R.SYSTEM_ERROR, f"commitOrRollback must be 8 (commit), 12 (rollback) or 0 (unknown), got {kind}")
    from_check = str(cmd.get_str("fromTransactionCheck") or "false").lower() == "true"
    if kind == UNKNOWN:
        log.info("transaction_end_unknown", producer_group=cmd.get_str("producerGroup"), from_check=from_check,
                 tran_state_table_offset=queue_offset)
        return cmd.response(R.SUCCESS, "transaction state unknown; the broker will check back")
    if commit_log_offset is None or queue_offset is None:
        return cmd.response(R.SYSTEM_ERROR, "END_TRANSACTION needs commitLogOffset and tranStateTableOffset")
    # the request names no topic: WRITE on the half message's real topic, found in the log
    half = await broker.run_blocking(broker.store.look_message_by_offset, commit_log_offset)
    if half is not None and half.topic == engine_transaction.HALF_TOPIC:
        refusal = processor_check(broker, conn, cmd, half.properties.get(engine_transaction.PROPERTY_REAL_TOPIC) or "",
                                  Op.WRITE)
        if refusal is not None:
            return cmd.response(R.NO_PERMISSION, refusal)
    svc = service(broker)
    try:
        result = await broker.put(svc.end, commit_log_offset, queue_offset, cmd.get_str("producerGroup"), kind == COMMIT)
    except TransactionError as exc:
        return cmd.response(R.SYSTEM_ERROR, f"Find prepared transaction message failed: {exc}")
    if result.put is not None and not result.put.ok:
        return cmd.response(R.SYSTEM_ERROR, f"committing the transaction failed: {result.put.error or result.put.status}")
    return cmd.response(R.SUCCESS)


def check_request(broker: Any, req: CheckRequest) -> RemotingCommand:
    half = req.half
    body = encode_unit(topic=req.real_topic.encode(), body=half.body, props=encode_properties(half.properties),
                       queue_id=req.real_queue_id, queue_offset=half.queue_offset, physical_offset=half.commitlog_offset,
                       flag=half.flag, sys_flag=half.sys_flag, born_timestamp=half.born_timestamp, born_host=half.born_host,
                       store_timestamp=half.store_timestamp, store_host=half.store_host,
                       reconsume_times=half.reconsume_times, prepared_transaction_offset=half.prepared_transaction_offset)
    fields = {"tranStateTableOffset": half.queue_offset, "commitLogOffset": half.commitlog_offset,
              "msgId": half.uniq_key or half.msg_id, "transactionId": req.transaction_id, "offsetMsgId": half.msg_id}
    cmd = RemotingCommand.request(RC.CHECK_TRANSACTION_STATE, fields, bytes(body), oneway=True)
    cmd.language = 0  # JAVA: the broker speaks as Apache RocketMQ's does
    cmd.serialize_type = broker.serialize_type
    return cmd


def ask_producer(broker: Any, req: CheckRequest) -> bool:
    channels = list(broker.producers.groups.get(req.producer_group, {}).values())
    random.shuffle(channels)
    for ch in channels:
        if ch.conn.closed:
            continue
        try:
            ch.conn.send(check_request(broker, req))
        except ConnectionClosedError:
            continue
        log.info("transaction_check_sent", producer_group=req.producer_group, client_id=ch.client_id,
                 half_offset=req.half.queue_offset, transaction_id=req.transaction_id)
        return True
    return False


async def check_loop(broker: Any) -> None:
    """Every transactionCheckInterval ms: one check round, then the check-backs — on the master
    only (a slave's half topic is a copy); the role is read every round, since failover may
    promote this broker."""
    cfg = broker.broker_config
    svc = service(broker)
    interval = max(int(cfg.transaction_check_interval), 50) / 1000
    while True:
        await asyncio.sleep(interval)
        if not broker.is_master:
            continue
        try:
            due = await broker.run_blocking(svc.check, int(cfg.transaction_time_out), int(cfg.transaction_check_max))
        except Exception:
            log.exception("transaction_check_failed")
            continue
        for req in due:
            if not svc.ask(req):
                log.warning("transaction_check_no_producer", producer_group=req.producer_group,
                            half_offset=req.half.queue_offset)
