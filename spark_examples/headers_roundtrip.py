"""Copy a topic to another with Spark, keeping every record's key, value and headers.

Reads the source with ``includeHeaders=true`` (each row gets ``headers``: an array of
``(key string, value binary)`` in record order) and writes key, value, headers and the source
partition with Spark's Kafka sink, so the copy holds the same records, with the same headers
byte for byte and in the same order, in the same partitions.

Invariant: nothing in a record is decoded or re-encoded on the way: keys, values and header
values stay binary.

Run: ``python spark_examples/headers_roundtrip.py --bootstrap 127.0.0.1:9092 --source in
--target out``
"""

from __future__ import annotations

import argparse
import sys

try:
    from spark_examples.common import spark_session
except ImportError:  # run as a script: python spark_examples/headers_roundtrip.py
    from common import spark_session


def copy_with_headers(spark, bootstrap: str, source: str, target: str, *,
                      keep_partition: bool = True) -> int:
    """Copy every record currently in ``source`` to ``target``; returns the record count."""
    df = (spark.read.format("kafka")
          .option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", source)
          .option("startingOffsets", "earliest")
          .option("endingOffsets", "latest")
          .option("includeHeaders", "true")
          .load()
          .cache())
    columns = ["key", "value", "headers"] + (["partition"] if keep_partition else [])
    count = df.count()
    (df.select(*columns).write.format("kafka")
     .option("kafka.bootstrap.servers", bootstrap)
     .option("topic", target)
     .save())
    df.unpersist()
    return count


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="copy a topic keeping record headers")
    ap.add_argument("--bootstrap", required=True, help="host:port of the Kafka listener")
    ap.add_argument("--source", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--any-partition", action="store_true",
                    help="let the producer pick partitions instead of keeping the source's")
    args = ap.parse_args(argv)
    spark = spark_session("rockafka-headers-roundtrip")
    try:
        n = copy_with_headers(spark, args.bootstrap, args.source, args.target,
                              keep_partition=not args.any_partition)
    finally:
        spark.stop()
    print(f"copied {n} records from {args.source} to {args.target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
