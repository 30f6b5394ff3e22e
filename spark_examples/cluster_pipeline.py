"""One ``rockafka`` pipeline for any Spark master (a standalone cluster, YARN, ``local[*]``),
submitted the way Spark jobs are: ``spark-submit --py-files rockafka_spark.zip``.

It writes ``--count`` messages (tags T0..T9 round robin, key ``k<i>``) with
``df.write.format("rockafka")``, reads back tag ``--tag`` with the tag pushed to the broker, and
prints one JSON line: the bodies read, the pushed filters ``explain`` showed, and where the
executors ran (host, the executor's Python daemon, the file ``rockafka_spark`` was imported from), so a caller can
see the work left the driver.

    python -m spark_examples.cluster_pipeline --zip /tmp/rockafka_spark.zip   # builds the zip
    spark-submit --master spark://127.0.0.1:7077 --py-files /tmp/rockafka_spark.zip \\
        spark_examples/cluster_pipeline.py --namesrv 127.0.0.1:9876 --topic orders --count 1000
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
import sys
from pathlib import Path

SOURCE_PKG = Path(__file__).resolve().parent / "rockafka_spark"


def build_zip(out: str) -> str:
    """``out`` (a .zip path): the ``rockafka_spark`` package, ready for ``--py-files`` / ``addPyFile``."""
    base = str(Path(out).with_suffix(""))
    return shutil.make_archive(base, "zip", root_dir=SOURCE_PKG, base_dir="rockafka_spark")


def _where(_rows):  # runs in an executor's Python worker
    import os
    import socket

    import rockafka_spark

    # the parent is the executor's Python daemon (one per executor JVM)
    yield (socket.gethostname(), os.getppid(), rockafka_spark.__file__)


def run(spark, namesrv: str, topic: str, count: int, tag: str) -> dict:
    from pyspark.sql import functions as F

    import rockafka_spark

    rockafka_spark.register(spark)
    msgs = spark.range(count).select(
        F.format_string("m%d", "id").alias("body"), F.format_string("T%d", F.col("id") % 10).alias("tags"),
        F.format_string("k%d", "id").alias("keys"))
    msgs.write.format("rockafka").option("namesrv", namesrv).option("topic", topic).mode("append").save()
    df = (spark.read.format("rockafka").option("namesrv", namesrv).option("topic", topic).load()
          .where(F.col("tags") == tag).select("body"))
    plan = io.StringIO()
    with contextlib.redirect_stdout(plan):
        df.explain("formatted")
    pushed = [line.strip() for line in plan.getvalue().splitlines() if line.startswith("PushedFilters")]
    bodies = sorted(r.body.decode() for r in df.collect())
    sc = spark.sparkContext
    where = sorted(set(sc.parallelize(range(8), 8).mapPartitions(_where).collect()))
    return {"bodies": bodies, "pushed": pushed, "executors": [list(w) for w in where],
            "driver_source": rockafka_spark.__file__}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--namesrv")
    ap.add_argument("--topic")
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--tag", default="T3")
    ap.add_argument("--zip", help="only build the package zip at this path and exit")
    args = ap.parse_args(argv)
    if args.zip:
        print(build_zip(args.zip))
        return 0
    if not (args.namesrv and args.topic):
        ap.error("--namesrv and --topic are required")
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("rockafka-cluster-pipeline").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        print("RESULT " + json.dumps(run(spark, args.namesrv, args.topic, args.count, args.tag)), flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
