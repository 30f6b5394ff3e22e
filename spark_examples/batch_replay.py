"""Batch replay: read a slice of a topic with Spark's ``kafka`` source, write a Parquet snapshot.

The slice is chosen the way Kafka users do it:
- ``startingOffsets`` / ``endingOffsets`` as JSON per partition, e.g.
  ``{"orders":{"0":10,"1":-2}}`` (-2 = earliest, -1 = latest), or ``earliest`` / ``latest``;
- or ``startingTimestamp`` (epoch ms): each partition starts at its first record whose
  timestamp is at or after it (Kafka's ListOffsets by timestamp); a partition with no such
  record contributes nothing.

Each Parquet row keeps the record as Spark's Kafka source delivers it: ``key`` and ``value``
(binary), ``topic``, ``partition``, ``offset``, ``timestamp``, ``timestampType`` and, with
``--headers``, ``headers``.

Invariants: the query is bounded (``endingOffsets`` defaults to ``latest`` as resolved when it
starts), so it terminates; with ``failOnDataLoss`` true (the default) a slice whose records are
no longer available fails instead of silently returning fewer rows.

Run: ``python spark_examples/batch_replay.py --bootstrap 127.0.0.1:9092 --topic orders
--out /tmp/orders.parquet [--starting-timestamp 1704067200000]``
"""

from __future__ import annotations

import argparse
import json
import sys

try:
    from spark_examples.common import spark_session
except ImportError:  # run as a script: python spark_examples/batch_replay.py
    from common import spark_session


def read_slice(spark, bootstrap: str, topic: str, *, starting_offsets: str | dict | None = None,
               ending_offsets: str | dict = "latest", starting_timestamp: int | None = None,
               include_headers: bool = False, options: dict[str, str] | None = None):
    """The records of ``topic`` in the slice, as a DataFrame (nothing is read until an action)."""
    reader = (spark.read.format("kafka")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic)
              .option("endingOffsets", _offsets_option(ending_offsets))
              .option("includeHeaders", str(include_headers).lower()))
    if starting_timestamp is not None:
        reader = reader.option("startingTimestamp", str(int(starting_timestamp)))
    elif starting_offsets is not None:
        reader = reader.option("startingOffsets", _offsets_option(starting_offsets))
    for key, value in (options or {}).items():
        reader = reader.option(key, value)
    return reader.load()


def _offsets_option(value: str | dict) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def replay(spark, bootstrap: str, topic: str, out: str, **slice_args) -> int:
    """Write the slice to Parquet at ``out`` (overwriting); returns the number of rows."""
    df = read_slice(spark, bootstrap, topic, **slice_args)
    df.write.mode("overwrite").parquet(out)
    return spark.read.parquet(out).count()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="replay a slice of a topic into a Parquet snapshot")
    ap.add_argument("--bootstrap", required=True, help="host:port of the Kafka listener")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--out", required=True, help="Parquet output directory (overwritten)")
    start = ap.add_mutually_exclusive_group()
    start.add_argument("--starting-offsets", default=None,
                       help='earliest, latest or JSON like {"orders":{"0":10}}')
    start.add_argument("--starting-timestamp", type=int, default=None, help="epoch ms")
    ap.add_argument("--ending-offsets", default="latest")
    ap.add_argument("--headers", action="store_true", help="keep record headers")
    args = ap.parse_args(argv)
    spark = spark_session("rockafka-batch-replay")
    try:
        rows = replay(spark, args.bootstrap, args.topic, args.out,
                      starting_offsets=args.starting_offsets or "earliest",
                      ending_offsets=args.ending_offsets,
                      starting_timestamp=args.starting_timestamp,
                      include_headers=args.headers)
    finally:
        spark.stop()
    print(f"wrote {rows} records of {args.topic} to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
