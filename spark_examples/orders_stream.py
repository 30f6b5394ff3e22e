"""Streaming pipeline: JSON orders from Kafka -> per-product, per-minute stats -> Kafka.

Reads topic ``orders`` (see ``generate_orders.py`` for the event shape) with Spark's ``kafka``
source, parses the JSON, sets a watermark on the event time (``ts``, epoch ms) and counts
orders, quantity and revenue per product in one-minute tumbling windows. A window is written
once, in append mode, when the watermark passes its end; each result is a JSON record keyed
``<product>@<window start ms>`` on topic ``order_stats``, written by Spark's Kafka sink.

Invariants:
- the only connection option is ``kafka.bootstrap.servers``: the pipeline is the one a Kafka
  user already runs;
- progress (source offsets, window state, watermark) lives in the checkpoint location, so a
  stopped query restarted with the same checkpoint continues where it stopped; the sink is
  at-least-once (a result may be written again after a restart), as with Kafka;
- records that are not valid order JSON are dropped, not fatal.

Run: ``python spark_examples/orders_stream.py --bootstrap 127.0.0.1:9092 --checkpoint /tmp/ckpt``
"""

from __future__ import annotations

import argparse
import sys

try:
    from spark_examples.common import spark_session
except ImportError:  # run as a script: python spark_examples/orders_stream.py
    from common import spark_session

WATERMARK_DELAY = "1 minute"
WINDOW = "1 minute"


def order_schema():
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    return StructType([
        StructField("order_id", StringType()),
        StructField("product", StringType()),
        StructField("quantity", IntegerType()),
        StructField("price_cents", LongType()),
        StructField("ts", LongType()),
    ])


def order_stats(kafka_df, *, watermark_delay: str = WATERMARK_DELAY, window: str = WINDOW):
    """Kafka rows (``value`` = order JSON) -> windowed stats per product."""
    from pyspark.sql import functions as F

    orders = (kafka_df
              .select(F.from_json(F.col("value").cast("string"), order_schema()).alias("o"))
              .select("o.*")
              # Not valid order JSON, or a field missing or of the wrong type: skip the record.
              .where(F.col("order_id").isNotNull() & F.col("product").isNotNull()
                     & F.col("quantity").isNotNull() & F.col("price_cents").isNotNull()
                     & F.col("ts").isNotNull())
              .withColumn("event_time", F.timestamp_millis("ts")))
    return (orders
            .withWatermark("event_time", watermark_delay)
            .groupBy(F.window("event_time", window), F.col("product"))
            .agg(F.count(F.lit(1)).alias("orders"),
                 F.sum("quantity").alias("quantity"),
                 F.sum(F.col("quantity") * F.col("price_cents")).alias("revenue_cents")))


def to_kafka_records(stats_df):
    """Stats rows -> (key, value) for the Kafka sink."""
    from pyspark.sql import functions as F

    start_ms = F.unix_millis(F.col("window.start"))
    end_ms = F.unix_millis(F.col("window.end"))
    return stats_df.select(
        F.concat_ws("@", F.col("product"), start_ms.cast("string")).alias("key"),
        F.to_json(F.struct(
            F.col("product"),
            start_ms.alias("window_start_ms"),
            end_ms.alias("window_end_ms"),
            F.col("orders"),
            F.col("quantity").cast("long").alias("quantity"),
            F.col("revenue_cents"),
        )).alias("value"))


def start(spark, bootstrap: str, checkpoint: str, *, source_topic: str = "orders",
          sink_topic: str = "order_stats", starting_offsets: str = "earliest",
          available_now: bool = False, source_options: dict[str, str] | None = None,
          query_name: str | None = None):
    """Start the pipeline; returns the running ``StreamingQuery``."""
    reader = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", source_topic)
              .option("startingOffsets", starting_offsets))
    for key, value in (source_options or {}).items():
        reader = reader.option(key, value)
    writer = (to_kafka_records(order_stats(reader.load()))
              .writeStream.format("kafka")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("topic", sink_topic)
              .option("checkpointLocation", checkpoint)
              .outputMode("append"))
    if query_name:
        writer = writer.queryName(query_name)
    if available_now:
        writer = writer.trigger(availableNow=True)
    return writer.start()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="orders -> per-product, per-minute stats")
    ap.add_argument("--bootstrap", required=True, help="host:port of the Kafka listener")
    ap.add_argument("--checkpoint", required=True, help="checkpoint directory (keep it to resume)")
    ap.add_argument("--source", default="orders")
    ap.add_argument("--sink", default="order_stats")
    ap.add_argument("--starting-offsets", default="earliest")
    ap.add_argument("--available-now", action="store_true",
                    help="process what is in the topic now, then stop")
    args = ap.parse_args(argv)
    spark = spark_session("rockafka-orders-stream")
    query = start(spark, args.bootstrap, args.checkpoint, source_topic=args.source,
                  sink_topic=args.sink, starting_offsets=args.starting_offsets,
                  available_now=args.available_now)
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
