"""A streaming job run as its own process by the kill test (test_stream_kill.py).

``python -m spark_examples.tests.stream_job NAMESRV TOPIC GROUP OUT CKPT [HOLD_BODY MARKER]``
reads TOPIC with the ``rockafka`` source (tag ``keep``, 20 offsets per micro-batch, available
now) and writes ``body`` to a parquet file sink at OUT with its checkpoint at CKPT. With
HOLD_BODY, the task that meets that body writes MARKER and then waits to be killed: the driver
is then SIGKILLed by the test while that micro-batch is being written (other tasks of the batch
may already have written their files). The wait is bounded (the test kills long before).
"""

from __future__ import annotations

import sys
import time


def main(argv: list[str]) -> int:
    namesrv, topic, group, out, ckpt = argv[:5]
    hold_body, marker = (argv[5], argv[6]) if len(argv) > 6 else (None, None)

    from pyspark.sql import functions as F

    import rockafka_spark
    from spark_examples.common import spark_session

    spark = spark_session("rockafka-kill-test", "local[2]")
    spark.sparkContext.setLogLevel("ERROR")
    rockafka_spark.register(spark)

    @F.udf("string")
    def hold(body):
        text = body.decode()
        if hold_body is not None and text == hold_body:
            with open(marker, "w") as f:
                f.write("in batch")
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:  # the test kills this process tree meanwhile
                time.sleep(0.2)
            raise RuntimeError("not killed")
        return text

    q = (spark.readStream.format("rockafka").option("namesrv", namesrv).option("topic", topic)
         .option("group", group).option("startingOffsets", "earliest").option("tags", "keep")
         .option("maxMessagesPerTrigger", "20").load()
         .select(hold("body").alias("body"), "queue", "offset")
         .writeStream.format("parquet").option("path", out).option("checkpointLocation", ckpt)
         .trigger(availableNow=True).start())
    q.awaitTermination(240)
    ok = q.exception() is None and not q.isActive
    spark.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
