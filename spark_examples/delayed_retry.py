"""Delayed retry with the ``rockafka`` data source: a streaming job that takes the messages
tagged ``failed`` off a topic and writes each back tagged ``retry`` with a delivery time that
grows with its attempt count (``attempt`` property), so the retries reach consumers later, from
the broker's timer, and not all at once. After ``--max-attempts`` a message goes to the dead
topic instead, tagged ``dead``.

The source is filtered at the broker (option ``tags=failed``). The sink is at-least-once: a
restart from the checkpoint re-plans an uncommitted micro-batch and may send its retries again
(timer messages cannot be transactional, RocketMQ's rule), so consumers of retries de-duplicate
by key, as RocketMQ consumers do anyway.

Run: ``python spark_examples/delayed_retry.py --namesrv 127.0.0.1:9876 --topic jobs
--dead-topic jobs-dead --checkpoint /tmp/retry-ckpt [--base-delay-s 5] [--available-now]``
"""

from __future__ import annotations

import argparse
import sys

try:
    from spark_examples.common import rockafka_session
except ImportError:  # run as a script
    from common import rockafka_session


def retries(spark, namesrv: str, topic: str, dead_topic: str, base_delay_s: int = 5, max_attempts: int = 5,
            starting_offsets: str = "latest"):
    """The retry stream: one output row per failed message (body, keys kept; topic, tags,
    properties.attempt and delivery_timestamp set)."""
    from pyspark.sql import functions as F

    failed = (spark.readStream.format("rockafka").option("namesrv", namesrv).option("topic", topic)
              .option("tags", "failed").option("startingOffsets", starting_offsets).load())
    attempt = F.coalesce(F.col("properties")["attempt"].cast("int"), F.lit(0)) + 1
    dead = attempt > max_attempts
    return failed.select(
        "body", "keys",
        F.when(dead, F.lit(dead_topic)).otherwise(F.col("topic")).alias("topic"),
        F.when(dead, F.lit("dead")).otherwise(F.lit("retry")).alias("tags"),
        F.map_concat(F.map_filter("properties", lambda k, v: ~k.isin("TAGS", "KEYS", "UNIQ_KEY", "attempt",
                                                                      "TIMER_DELIVER_MS", "TIMER_OUT_MS")),
                     F.create_map(F.lit("attempt"), attempt.cast("string"))).alias("properties"),
        # exponential back-off: base, 2 x base, 4 x base ... from now
        F.when(dead, F.lit(None).cast("timestamp")).otherwise(
            F.timestamp_millis((F.unix_millis(F.current_timestamp())
                                + F.lit(base_delay_s * 1000) * F.pow(F.lit(2), attempt - 1)).cast("long"))
        ).alias("delivery_timestamp"))


def start(spark, namesrv: str, topic: str, dead_topic: str, checkpoint: str, *, available_now: bool = False,
          **kwargs):
    writer = (retries(spark, namesrv, topic, dead_topic, **kwargs).writeStream.format("rockafka")
              .option("namesrv", namesrv).option("checkpointLocation", checkpoint))
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="2 seconds")
    return writer.start()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--namesrv", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--dead-topic", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--base-delay-s", type=int, default=5)
    ap.add_argument("--max-attempts", type=int, default=5)
    ap.add_argument("--starting-offsets", default="latest")
    ap.add_argument("--available-now", action="store_true")
    args = ap.parse_args(argv)
    spark = rockafka_session("rockafka-delayed-retry")
    try:
        q = start(spark, args.namesrv, args.topic, args.dead_topic, args.checkpoint, available_now=args.available_now,
                  base_delay_s=args.base_delay_s, max_attempts=args.max_attempts,
                  starting_offsets=args.starting_offsets)
        q.awaitTermination()
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
