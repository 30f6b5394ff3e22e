"""Tag-filtered ETL with the ``rockafka`` data source: one tag (or a few) out of a busy topic,
chosen by the broker, written as a Parquet snapshot.

The ``tags IN (...)`` and ``store_timestamp >= ...`` predicates are pushed to the broker (tag
filter in each pull, offset by time), so Spark receives only the matching messages; ``explain``
lists them under ``PushedFilters``. Each Parquet row keeps topic, queue, offset, message id,
key, tags, properties, body (as text) and store time.

Run: ``python spark_examples/tag_etl.py --namesrv 127.0.0.1:9876 --topic orders --tags paid,refunded
--out /tmp/paid.parquet [--since-ms 1704067200000]``
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone

try:
    from spark_examples.common import rockafka_session
except ImportError:  # run as a script: python spark_examples/tag_etl.py
    from common import rockafka_session


def tagged(spark, namesrv: str, topic: str, tags: list[str], since_ms: int | None = None):
    """The messages of ``topic`` with one of ``tags`` (stored at or after ``since_ms``)."""
    from pyspark.sql import functions as F

    df = (spark.read.format("rockafka").option("namesrv", namesrv).option("topic", topic).load()
          .where(F.col("tags").isin(tags)))
    if since_ms is not None:
        df = df.where(F.col("store_timestamp") >= datetime.fromtimestamp(since_ms / 1000, tz=timezone.utc))
    return df.select("topic", "queue", "offset", "message_id", "key", "tags", "properties",
                     F.col("body").cast("string").alias("body"), "store_timestamp")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--namesrv", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--tags", required=True, help="comma separated")
    ap.add_argument("--out", required=True)
    ap.add_argument("--since-ms", type=int)
    args = ap.parse_args(argv)
    spark = rockafka_session("rockafka-tag-etl")
    try:
        df = tagged(spark, args.namesrv, args.topic, [t for t in args.tags.split(",") if t], args.since_ms)
        df.write.mode("overwrite").parquet(args.out)
        print(f"wrote {spark.read.parquet(args.out).count()} rows to {args.out}")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
