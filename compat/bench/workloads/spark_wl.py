"""A Spark batch read of a whole topic (rows/s) through Spark's own Kafka connector.

One SparkSession (spark_examples/common.py: local[2], the connector jars from
spark_examples/jars/, nothing downloaded) serves every system and repetition, so JVM start-up is
paid once and not measured. Each read forces every value through Spark (count and sum of value
lengths), so no side skips the fetch.
"""

from __future__ import annotations

import time


class SparkReader:
    def __init__(self) -> None:
        from spark_examples.common import spark_session

        # the driver binds loopback only, like every server of the benchmark
        self.spark = spark_session("rockafka-bench", conf={"spark.driver.memory": "1g",
                                                            "spark.driver.bindAddress": "127.0.0.1",
                                                            "spark.driver.host": "127.0.0.1"})
        self.spark.sparkContext.setLogLevel("ERROR")

    def read(self, bs: str, topic: str, expect_rows: int) -> dict:
        from pyspark.sql import functions as F

        t0 = time.perf_counter()
        df = (self.spark.read.format("kafka")
              .option("kafka.bootstrap.servers", bs)
              .option("subscribe", topic)
              .option("startingOffsets", "earliest")
              .option("endingOffsets", "latest")
              .load())
        row = df.agg(F.count(F.lit(1)).alias("rows"), F.sum(F.length("value")).alias("bytes")).collect()[0]
        elapsed = time.perf_counter() - t0
        rows = int(row["rows"])
        if rows != expect_rows:
            raise RuntimeError(f"Spark read {rows} rows, expected {expect_rows}")
        return {"rows": rows, "seconds": elapsed, "rows_per_s": rows / elapsed,
                "mib_per_s": int(row["bytes"] or 0) / elapsed / 2**20}

    def stop(self) -> None:
        self.spark.stop()
