"""Writing rows as messages: ``df.write.format("rockafka")`` and ``df.writeStream``.

Input columns (by name; only ``body`` is required): ``body`` (binary or string), ``topic``
(else option ``topic``), ``tags``, ``keys`` (string, space separated, or array of strings),
``properties`` (map<string,string>), ``delay_level`` (1..18, RocketMQ's levels),
``delivery_timestamp`` (timestamp: deliver at that time, RocketMQ 5 timer messages).

Plain writes: each task sends its rows synchronously (SEND_OK or the task fails).
Transactional writes (option ``transactional=true``): each task sends half messages (invisible
to consumers) and hands their send results to the driver in its commit message; Spark's job
commit (``commit``) ends them all as COMMIT, a job abort (``abort``) as ROLLBACK, and a task
that fails rolls back what it had sent before it re-raises. A half message nobody ends (the
executor was killed) is resolved by the broker's check-back: the producer group answers
"unknown" and the broker rolls it back after ``transactionCheckMax`` checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterator

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage

from .schema import Options, OptionError


@dataclass
class SentMessages(WriterCommitMessage):
    count: int = 0
    halves: list[Any] = field(default_factory=list)  # SendResults of half messages, to end on commit


class _Unknown:
    """Check-back answer while the job has not decided: the job's commit or abort ends it."""

    def execute_local_transaction(self, msg: Any, arg: Any) -> Any:
        from gateway_native.client import LocalTransactionState
        return LocalTransactionState.UNKNOW

    def check_local_transaction(self, msg: Any) -> Any:
        from gateway_native.client import LocalTransactionState
        return LocalTransactionState.UNKNOW


def _message(row: Any, options: Options) -> Any:
    from gateway_native.client import Message

    d = row.asDict(recursive=False)
    topic = d.get("topic") or options.topic
    if not topic:
        raise OptionError("no topic: give option 'topic' or a 'topic' column")
    body = d.get("body")
    if body is None:
        raise OptionError("column 'body' is required (binary or string) and may not be null")
    body = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    keys = d.get("keys")
    if isinstance(keys, (list, tuple)):
        keys = [k for k in keys if k]
    deliver = d.get("delivery_timestamp")
    deliver_ms = int(deliver.timestamp() * 1000) if isinstance(deliver, datetime) else 0
    return Message(topic, body, tags=d.get("tags") or None, keys=keys or None,
                   properties={str(k): str(v) for k, v in (d.get("properties") or {}).items() if v is not None},
                   delay_level=int(d.get("delay_level") or 0), deliver_time_ms=deliver_ms)


def write_rows(options: Options, rows: Iterator[Any]) -> SentMessages:
    from gateway_native.client import MQClientError, Producer, SendStatus, TransactionProducer

    out = SentMessages()
    if options.transactional:
        producer = TransactionProducer(options.producer_group, options.namesrv, _Unknown()).start()
    else:
        producer = Producer(options.producer_group, options.namesrv).start()
    try:
        for row in rows:
            msg = _message(row, options)
            if options.transactional:
                if msg.delay_level or msg.deliver_time_ms:
                    raise OptionError("a transactional write cannot carry delay_level or delivery_timestamp")
                out.halves.append(producer.send_half(msg))
            else:
                sent = producer.send(msg)
                if sent.status != SendStatus.SEND_OK:
                    raise MQClientError(f"send to {sent.message_queue} answered {sent.status.name}")
            out.count += 1
        return out
    except BaseException:
        if out.halves:  # this task failed: its half messages never become visible
            _end_all(producer, out.halves, commit=False)
        raise
    finally:
        producer.shutdown()


def _end_all(producer: Any, halves: list[Any], commit: bool) -> None:
    for sent in halves:
        producer.end_transaction(sent, commit)


def end_job(options: Options, messages: list[Any], commit: bool) -> None:
    halves = [s for m in messages if m is not None for s in m.halves]
    if not halves:
        return
    from gateway_native.client import TransactionProducer

    producer = TransactionProducer(options.producer_group, options.namesrv, _Unknown()).start()
    try:
        _end_all(producer, halves, commit)
    finally:
        producer.shutdown()


class RockafkaWriter(DataSourceWriter):
    def __init__(self, options: Options):
        self.options = options

    def write(self, iterator):
        return write_rows(self.options, iterator)

    def commit(self, messages) -> None:
        end_job(self.options, messages, commit=True)

    def abort(self, messages) -> None:
        end_job(self.options, messages, commit=False)


class RockafkaStreamWriter(DataSourceStreamWriter):
    """Per micro-batch: plain writes are at-least-once (a batch re-run after a failure sends its
    rows again); transactional writes make a micro-batch visible only when Spark commits it."""

    def __init__(self, options: Options):
        self.options = options

    def write(self, iterator):
        return write_rows(self.options, iterator)

    def commit(self, messages, batchId) -> None:  # noqa: N803 - Spark's name
        end_job(self.options, messages, commit=True)

    def abort(self, messages, batchId) -> None:  # noqa: N803
        end_job(self.options, messages, commit=False)
