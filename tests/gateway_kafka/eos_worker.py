"""One consume-transform-produce worker of the exactly-once stress test (a child process).

Usage: ``python eos_worker.py BOOTSTRAP GROUP TRANSACTIONAL_ID SOURCE DESTINATION SECONDS``

The loop a Kafka Streams-like application runs with confluent-kafka (librdkafka): a
read_committed consumer in GROUP, a transactional producer; per poll, one transaction holding
the transformed records (value ``<source partition>:<source offset>:<source value>``) and the
consumed offsets (send_offsets_to_transaction with the consumer's group metadata, KIP-447).
Errors are handled as librdkafka documents: retriable -> retry the call, abortable -> abort and
rewind to the committed offsets, anything else -> exit (the parent starts the worker again, and
its InitProducerId fences this incarnation).

Prints one JSON line per event on stdout: ``{"event": "committed", "offsets": {partition:
next offset}}`` after commit_transaction returned, ``aborted`` and ``error`` lines for the log.
Bounded: runs at most SECONDS.
"""

from __future__ import annotations

import json
import os
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition


def emit(**kw) -> None:
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()


def retrying(call, what: str, deadline: float):
    while True:
        try:
            return call()
        except KafkaException as exc:
            err = exc.args[0]
            if err.retriable() and time.monotonic() < deadline:
                emit(event="retry", call=what, error=str(err))
                continue
            raise


def main() -> int:
    bootstrap, group, tid, source, destination, seconds = sys.argv[1:7]
    deadline = time.monotonic() + float(seconds)
    # metadata.recovery.strategy=none: when its only broker is down, librdkafka 2.10+ re-bootstraps,
    # decommissioning the cached group coordinator, and send_offsets_to_transaction then hangs past
    # its timeout (librdkafka issues 5511 and 5456). A one-node cluster restarting hits that every time.
    common = {"bootstrap.servers": bootstrap, "reconnect.backoff.ms": 100, "reconnect.backoff.max.ms": 1000,
              "socket.timeout.ms": 10000, "metadata.recovery.strategy": "none"}
    if os.environ.get("EOS_WORKER_DEBUG"):  # librdkafka's own trace on stderr, for a failure's post-mortem
        common["debug"] = os.environ["EOS_WORKER_DEBUG"]
    consumer = Consumer({**common, "group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed", "session.timeout.ms": 10000,
                         "heartbeat.interval.ms": 1000, "max.poll.interval.ms": 120000})
    producer = Producer({**common, "transactional.id": tid, "transaction.timeout.ms": 60000, "linger.ms": 5,
                         "message.timeout.ms": 60000})
    retrying(lambda: producer.init_transactions(30), "init_transactions", deadline)
    consumer.subscribe([source])
    emit(event="started", transactional_id=tid)
    while time.monotonic() < deadline:
        msgs = [m for m in consumer.consume(20, 0.5) if m.error() is None]
        if not msgs:
            continue
        offsets: dict[int, int] = {}
        try:
            producer.begin_transaction()
            for m in msgs:
                producer.produce(destination, value=f"{m.partition()}:{m.offset()}:{m.value().decode()}".encode(),
                                 partition=m.partition())
                offsets[m.partition()] = m.offset() + 1
            retrying(lambda: producer.send_offsets_to_transaction(
                [TopicPartition(source, p, o) for p, o in offsets.items()], consumer.consumer_group_metadata(), 30),
                "send_offsets_to_transaction", deadline)
            retrying(lambda: producer.commit_transaction(30), "commit_transaction", deadline)
            emit(event="committed", offsets={str(p): o for p, o in offsets.items()})
        except KafkaException as exc:
            err = exc.args[0]
            if not err.txn_requires_abort():
                emit(event="error", error=str(err), fatal=err.fatal())
                return 3
            emit(event="aborted", error=str(err))
            retrying(lambda: producer.abort_transaction(30), "abort_transaction", deadline)
            assigned = consumer.assignment()
            if assigned:
                for tp in retrying(lambda: consumer.committed(assigned, 30), "committed", deadline):
                    consumer.seek(TopicPartition(source, tp.partition, tp.offset if tp.offset >= 0 else 0))
    consumer.close()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KafkaException as exc:  # an error the loop does not recover from: exit, the parent restarts
        emit(event="error", error=str(exc.args[0]), fatal=True)
        sys.exit(3)
