"""Dead-letter audit with the ``rockafka`` data source: what a consumer group gave up on, where
it came from, how often it was tried, and why it was buried.

Reads ``%DLQ%<group>`` for each group given (a batch read of the whole topic; a group with no
DLQ topic yet has nothing to audit). Each dead letter carries, as the broker wrote it
(RocketMQ's ``consumerSendMsgBack`` / POP revive): ``RETRY_TOPIC`` (or ``DLQ_ORIGIN_TOPIC``) —
the topic it was first consumed from; ``ORIGIN_MESSAGE_ID`` (or ``DLQ_ORIGIN_MESSAGE_ID``) —
its message id there; the reconsume count (deliveries so far). The reason follows from them:

- ``retries exhausted`` — delivered more than once, handed back each time until the group's
  limit (``maxReconsumeTimes`` / ``retryMaxTimes``);
- ``no retry`` — buried at its first failure (the consumer sent it back with a negative delay
  level, or the group allows no retry).

``dead_letters`` gives one row per message; ``audit`` one row per (group, original topic, tag,
reason) with the number of messages, the highest reconsume count, the first and last burial time and a few
original message ids to look up. The output is printed, and written as JSON with ``--out``.

Run: ``python spark_examples/dlq_audit.py --namesrv 127.0.0.1:9876 --group orders-consumers
[--group billing] [--out /tmp/dlq-audit]``
"""

from __future__ import annotations

import argparse
import sys

try:
    from spark_examples.common import rockafka_session
except ImportError:  # run as a script
    from common import rockafka_session

DLQ_PREFIX = "%DLQ%"


def dead_letters(spark, namesrv: str, group: str):
    """One row per dead letter of ``group``: group, original topic and message id, its id in the
    DLQ, tags, keys, reconsume count, reason, burial time and body."""
    from pyspark.sql import functions as F

    df = (spark.read.format("rockafka").option("namesrv", namesrv).option("topic", DLQ_PREFIX + group)
          .option("startingOffsets", "earliest").load())
    props = F.col("properties")
    return df.select(
        F.lit(group).alias("group"),
        F.coalesce(props["RETRY_TOPIC"], props["DLQ_ORIGIN_TOPIC"]).alias("original_topic"),
        F.coalesce(props["ORIGIN_MESSAGE_ID"], props["DLQ_ORIGIN_MESSAGE_ID"]).alias("original_message_id"),
        "message_id", "tags", "keys", "reconsume_times",
        F.when(F.col("reconsume_times") > 1, F.lit("retries exhausted")).otherwise(F.lit("no retry")).alias("reason"),
        F.col("store_timestamp").alias("buried_at"), "body")


def audit(letters):
    """Dead letters grouped by (group, original topic, tag, reason)."""
    from pyspark.sql import functions as F

    return (letters.groupBy("group", "original_topic", "tags", "reason")
            .agg(F.count(F.lit(1)).alias("messages"), F.max("reconsume_times").alias("max_reconsume_times"),
                 F.min("buried_at").alias("first_buried"), F.max("buried_at").alias("last_buried"),
                 F.slice(F.sort_array(F.collect_list("original_message_id")), 1, 5).alias("sample_message_ids"))
            .orderBy(F.desc("messages"), "group", "original_topic", "tags", "reason"))


def audit_groups(spark, namesrv: str, groups: list[str]):
    """The audit of every group in ``groups`` that has a DLQ topic (a union of their letters)."""
    from functools import reduce

    frames = []
    for g in groups:
        try:
            frames.append(dead_letters(spark, namesrv, g).cache())
            frames[-1].count()  # plans now: a group without a DLQ topic fails here, not later
        except Exception as exc:  # noqa: BLE001 - Spark wraps the source's error
            if "route" not in str(exc).lower():
                raise
            frames.pop()
            print(f"group {g}: no dead letters (no {DLQ_PREFIX}{g} topic)", file=sys.stderr)
    if not frames:
        return None
    return audit(reduce(lambda a, b: a.unionByName(b), frames))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--namesrv", required=True)
    ap.add_argument("--group", action="append", required=True, help="consumer group (repeatable)")
    ap.add_argument("--out", help="also write the audit as JSON here")
    args = ap.parse_args(argv)
    spark = rockafka_session("rockafka-dlq-audit")
    try:
        report = audit_groups(spark, args.namesrv, args.group)
        if report is None:
            return 0
        report.show(truncate=False)
        if args.out:
            report.write.mode("overwrite").json(args.out)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
