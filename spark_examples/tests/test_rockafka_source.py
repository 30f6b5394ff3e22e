"""The ``rockafka`` data source (spark_examples/rockafka_spark) end to end: a real local[2]
SparkSession, a real node, messages produced with the project's SDK and a Kafka client.

Pushdown is proven by what the broker sent, not only by the result: every read uses its own
consumer group, and the broker's GROUP_GET_NUMS counter for ``topic@group`` (VIEW_BROKER_STATS_DATA)
says how many messages it handed out.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timedelta, timezone

import pytest

from spark_examples.tests.helpers import flush_all, producer, unique

pytestmark = pytest.mark.timeout(300)

N = 120          # messages in the shared topic
TAGS = [f"T{i}" for i in range(10)]


@pytest.fixture(scope="module")
def rockafka(spark):
    import rockafka_spark

    rockafka_spark.register(spark)
    return spark


@pytest.fixture(scope="module")
def admin(node):
    from gateway_native.client import Admin

    with Admin(node.namesrv_addr) as a:
        yield a


@pytest.fixture(scope="module")
def topic(node, admin):
    """N messages in 2 queues: tag T(i%10), key k<i>, color red/blue, amount i; the store time
    of the second half is after ``split`` (recorded between the halves)."""
    from gateway_native.client import Message, Producer

    name = unique("rs")
    admin.create_topic(name, 2)
    p = Producer(unique("pg"), node.namesrv_addr).start()
    split = None
    try:
        for i in range(N):
            if i == N // 2:
                time.sleep(0.01)  # store times are in ms: make the split fall strictly between two halves
                split = datetime.now(timezone.utc)
                time.sleep(0.01)
            p.send(Message(name, f"m{i}".encode(), tags=TAGS[i % 10], keys=[f"k{i}", f"alt{i}"],
                           properties={"color": "red" if i % 3 == 0 else "blue", "amount": str(i)}))
    finally:
        p.shutdown()
    return name, split


def source(spark, node, topic_name, group, **options):
    reader = (spark.read.format("rockafka").option("namesrv", node.namesrv_addr).option("topic", topic_name)
              .option("group", group))
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def broker_sent(admin, node, topic_name, group) -> int:
    """Messages the broker handed to ``group`` on ``topic_name`` (0 when it never pulled)."""
    from gateway_native.remoting.codes import RequestCode as RC

    rt = admin.runtime
    resp = rt.call(rt.invoke(node.broker_addr, rt.request(RC.VIEW_BROKER_STATS_DATA, {
        "statsName": "GROUP_GET_NUMS", "statsKey": f"{topic_name}@{group}"})), timeout=30)
    if resp.code != 0:
        assert "not exist" in (resp.remark or ""), resp.remark
        return 0
    return int(json.loads(resp.body)["statsDay"]["sum"])


def pushed(df) -> str:
    import io
    from contextlib import redirect_stdout

    out = io.StringIO()
    with redirect_stdout(out):
        df.explain("formatted")
    text = out.getvalue()
    line = next((ln for ln in text.splitlines() if ln.startswith("PushedFilters")), "")
    return line


def test_whole_topic_has_every_column(rockafka, node, admin, topic):
    name, _ = topic
    group = unique("g")
    rows = source(rockafka, node, name, group).collect()
    assert len(rows) == N
    by_body = {r.body: r for r in rows}
    r = by_body[b"m7"]
    assert (r.topic, r.tags, r.key, r.keys) == (name, "T7", "k7", ["k7", "alt7"])
    assert r.properties["color"] == "blue" and r.properties["amount"] == "7"
    assert r.kafka_key == b"k7" and r.kafka_offset == r.offset
    assert ("rmq.tags", b"T7") in [(h.key, h.value) for h in r.kafka_headers]
    assert r.message_id and r.offset_message_id and r.reconsume_times == 0
    assert r.store_timestamp >= r.born_timestamp - timedelta(seconds=1)
    # per queue, offsets are exactly 0..n-1
    for q in (0, 1):
        offs = sorted(x.offset for x in rows if x.queue == q)
        assert offs == list(range(len(offs)))
    assert broker_sent(admin, node, name, group) == N


def test_tags_are_filtered_by_the_broker(rockafka, node, admin, topic):
    name, _ = topic
    group = unique("g")
    df = source(rockafka, node, name, group).where("tags IN ('T1', 'T4')")
    assert "In(tags, [T1,T4])" in pushed(df)
    bodies = sorted(int(r.body[1:]) for r in df.select("body").collect())
    assert bodies == [i for i in range(N) if i % 10 in (1, 4)]
    assert broker_sent(admin, node, name, group) == len(bodies)  # not N: the broker filtered

    group = unique("g")
    one = source(rockafka, node, name, group).where("tags = 'T9'")
    assert one.count() == N // 10
    assert broker_sent(admin, node, name, group) == N // 10


def test_property_predicates_become_sql92_at_the_broker(rockafka, node, admin, topic):
    name, _ = topic
    group = unique("g")
    df = (source(rockafka, node, name, group, **{"properties.fields": "color,amount:long"})
          .where("props.color = 'red' AND props.amount >= 60 AND tags <> 'T0'"))
    plan = pushed(df)
    assert "EqualTo(props.color,red)" in plan and "GreaterThanOrEqual(props.amount,60)" in plan
    got = sorted(r.props.amount for r in df.collect())
    expected = [i for i in range(N) if i % 3 == 0 and i >= 60 and i % 10 != 0]
    assert got == expected
    # tags <> 'T0' is not pushed (Spark applies it): the broker sent the SQL92 matches
    assert broker_sent(admin, node, name, group) == len([i for i in range(N) if i % 3 == 0 and i >= 60])

    group = unique("g")
    both = (source(rockafka, node, name, group, **{"properties.fields": "color"})
            .where("tags IN ('T3', 'T6') AND props.color LIKE 're%'"))
    got = sorted(int(r.body[1:]) for r in both.collect())
    assert got == [i for i in range(N) if i % 10 in (3, 6) and i % 3 == 0]
    assert broker_sent(admin, node, name, group) == len(got)


def test_key_equality_is_an_index_lookup(rockafka, node, admin, topic):
    name, _ = topic
    group = unique("g")
    df = source(rockafka, node, name, group).where("key = 'k42'")
    assert "EqualTo(key,k42)" in pushed(df)
    rows = df.collect()
    assert [(r.key, r.body) for r in rows] == [("k42", b"m42")]
    # a second key of the same message is not its ``key`` column: no row
    assert source(rockafka, node, name, unique("g")).where("key = 'alt42'").count() == 0
    assert broker_sent(admin, node, name, group) == 0  # answered from the index: no pull at all


def test_store_time_and_queue_narrow_the_scan(rockafka, node, admin, topic):
    name, split = topic
    group = unique("g")
    from pyspark.sql.functions import col

    df = source(rockafka, node, name, group).where((col("store_timestamp") > split) & (col("queue") == 1))
    plan = pushed(df)
    assert "GreaterThan(store_timestamp" in plan and "EqualTo(queue,1)" in plan
    rows = df.collect()
    everything = source(rockafka, node, name, unique("g")).collect()
    expected = sorted(int(r.body[1:]) for r in everything if r.queue == 1 and int(r.body[1:]) >= N // 2)
    assert sorted(int(r.body[1:]) for r in rows) == expected and expected
    assert broker_sent(admin, node, name, group) == len(expected)


def test_kafka_produced_records_show_both_views(rockafka, node, admin):
    from gateway_native.client import Admin  # noqa: F401 - the topic is made by the Kafka client

    name = unique("kr")
    admin.create_topic(name, 1)
    p = producer(node.kafka_bootstrap)
    for i in range(3):
        p.produce(name, key=f"user-{i}".encode(), value=f"v{i}".encode(), partition=0,
                  headers=[("trace", b"\x00\x01"), ("rmq.tags", b"kafka")])
    flush_all(p)
    rows = sorted(source(rockafka, node, name, unique("g")).where("tags = 'kafka'").collect(),
                  key=lambda r: r.offset)
    assert [(r.key, r.kafka_key, r.kafka_offset, r.body) for r in rows] == [
        (f"user-{i}", f"user-{i}".encode(), i, f"v{i}".encode()) for i in range(3)]
    assert ("trace", b"\x00\x01") in [(h.key, h.value) for h in rows[0].kafka_headers]


def test_writes_carry_tags_keys_properties_and_a_delivery_time(rockafka, node, admin):
    from pyspark.sql import functions as F

    name = unique("w")
    admin.create_topic(name, 2)
    df = (rockafka.range(10)
          .select(F.concat(F.lit("b"), F.col("id").cast("string")).alias("body"),
                  F.when(F.col("id") % 2 == 0, "even").otherwise("odd").alias("tags"),
                  F.array(F.concat(F.lit("id-"), F.col("id").cast("string"))).alias("keys"),
                  F.create_map(F.lit("n"), F.col("id").cast("string")).alias("properties")))
    df.write.format("rockafka").option("namesrv", node.namesrv_addr).option("topic", name).mode("append").save()
    rows = source(rockafka, node, name, unique("g")).where("tags = 'even'").collect()
    assert sorted((r.body, r.key, r.properties["n"]) for r in rows) == sorted(
        (f"b{i}".encode(), f"id-{i}", str(i)) for i in range(0, 10, 2))

    # delivery time: invisible until then, then visible, with the time it was meant for
    deliver = datetime.now(timezone.utc) + timedelta(seconds=8)
    delayed = rockafka.createDataFrame([("later", deliver)], "body string, delivery_timestamp timestamp")
    delayed.write.format("rockafka").option("namesrv", node.namesrv_addr).option("topic", name).mode("append").save()
    before = source(rockafka, node, name, unique("g")).where("body = cast('later' as binary)").count()
    read_done = datetime.now(timezone.utc)
    assert read_done < deliver, "the machine was too slow to look before the delivery time"
    assert before == 0
    deadline = time.monotonic() + 60
    seen = []
    while not seen and time.monotonic() < deadline:
        seen = source(rockafka, node, name, unique("g")).where("body = cast('later' as binary)").collect()
        if not seen:
            time.sleep(0.5)
    assert seen, "the delayed message never arrived"
    assert seen[0].delivery_timestamp.astimezone(timezone.utc) == deliver.replace(
        microsecond=deliver.microsecond // 1000 * 1000)
    # Spark hands timestamps back as session-local naive datetimes; the timer's step is 1 s
    assert seen[0].store_timestamp.astimezone(timezone.utc) >= deliver - timedelta(seconds=1)


def test_transactional_write_commits_on_success_and_leaves_nothing_on_failure(rockafka, node, admin):
    from pyspark.sql import functions as F

    name = unique("tx")
    admin.create_topic(name, 2)
    opts = {"namesrv": node.namesrv_addr, "topic": name, "transactional": "true"}
    ok = rockafka.range(20).select(F.col("id").cast("string").alias("body")).repartition(2)
    ok.write.format("rockafka").options(**opts).mode("append").save()
    assert source(rockafka, node, name, unique("g")).count() == 20

    # task 2 of 2 meets a row without a body after sending some halves: the job fails, the
    # finished task's halves are rolled back by the job abort, the failing task's by itself
    bad = (rockafka.range(40).repartition(2, "id")
           .select(F.when(F.col("id") == 33, F.lit(None)).otherwise(F.concat(F.lit("x"), F.col("id").cast("string")))
                   .alias("body")))
    from gateway_native.client import MessageQueue

    broker_name = admin.message_queues(name)[0].broker_name  # also caches the broker's address
    half_q = MessageQueue("RMQ_SYS_TRANS_HALF_TOPIC", broker_name, 0)
    op_q = MessageQueue("RMQ_SYS_TRANS_OP_HALF_TOPIC", broker_name, 0)
    halves_before, ops_before = admin.max_offset(half_q), admin.max_offset(op_q)
    with pytest.raises(Exception) as failed:
        bad.write.format("rockafka").options(**opts).mode("append").save()
    assert "body" in str(failed.value)
    # every half message the failed job sent was ended (rolled back) at once, none left to
    # the broker's check-back
    sent = admin.max_offset(half_q) - halves_before
    assert sent > 0
    assert admin.max_offset(op_q) - ops_before == sent
    after = source(rockafka, node, name, unique("g")).collect()
    assert sorted(r.body for r in after) == sorted(str(i).encode() for i in range(20))


def test_stream_restarted_from_checkpoint_neither_loses_nor_repeats(rockafka, node, admin, tmp_path):
    from pyspark.errors import StreamingQueryException
    from pyspark.sql import functions as F
    from gateway_native.client import Message, Producer

    name = unique("st")
    admin.create_topic(name, 2)
    group = unique("sg")
    p = Producer(unique("pg"), node.namesrv_addr).start()

    def produce(lo, hi):
        for i in range(lo, hi):
            p.send(Message(name, f"s{i}".encode(), tags="keep" if i % 2 == 0 else "drop"))

    poison = tmp_path / "poison"
    poison_path = str(poison)

    @F.udf("string")
    def check(body):
        import os
        if body == b"s40" and os.path.exists(poison_path):
            raise RuntimeError("killed mid-batch")
        return body.decode()

    def start():
        return (rockafka.readStream.format("rockafka").option("namesrv", node.namesrv_addr)
                .option("topic", name).option("group", group).option("startingOffsets", "earliest")
                .option("tags", "keep").option("maxMessagesPerTrigger", "10").load()
                .select(check("body").alias("body"), "queue", "offset")
                .writeStream.format("parquet").option("path", str(tmp_path / "out"))
                .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())

    try:
        produce(0, 60)
        poison.write_text("1")
        q = start()
        with pytest.raises(StreamingQueryException):
            q.awaitTermination(120)
        poison.unlink()
        produce(60, 80)
        q = start()
        assert q.awaitTermination(120), "the restarted query did not finish"
        assert q.exception() is None
    finally:
        p.shutdown()
    out = rockafka.read.parquet(str(tmp_path / "out")).collect()
    bodies = sorted(int(r.body[1:]) for r in out)
    assert bodies == [i for i in range(80) if i % 2 == 0]  # nothing lost, nothing twice
    # the group's offsets on the broker are the end of a micro-batch Spark checkpointed (Spark
    # tells a source a batch is committed when it plans the next one, so the last one is not)
    progress = {f"{qp.queue.broker_name}:{qp.queue.queue_id}": qp.consumer_offset
                for qp in admin.consumer_progress(group, name)}
    batch_ends = [json.loads((tmp_path / "ckpt" / "offsets" / f).read_text().splitlines()[-1])
                  for f in os.listdir(tmp_path / "ckpt" / "offsets") if f.isdigit()]
    assert progress in batch_ends
    assert sum(progress.values()) >= 40  # at least everything the first run committed


def test_tag_etl_example_writes_only_the_chosen_tags(rockafka, node, admin, topic, tmp_path):
    from spark_examples import tag_etl

    name, split = topic
    group_df = tag_etl.tagged(rockafka, node.namesrv_addr, name, ["T2", "T5"],
                              since_ms=int(split.timestamp() * 1000))
    group_df.write.parquet(str(tmp_path / "out"))
    got = sorted(int(r.body[1:]) for r in rockafka.read.parquet(str(tmp_path / "out")).collect())
    assert got == [i for i in range(N // 2, N) if i % 10 in (2, 5)]


def test_delayed_retry_example_schedules_retries_and_buries_the_exhausted(rockafka, node, admin, tmp_path):
    from gateway_native.client import Message, Producer
    from spark_examples import delayed_retry

    jobs, dead = unique("jobs"), unique("dead")
    admin.create_topic(jobs, 2)
    admin.create_topic(dead, 1)
    p = Producer(unique("pg"), node.namesrv_addr).start()
    try:
        p.send(Message(jobs, b"a", tags="failed", keys=["job-a"]))
        p.send(Message(jobs, b"b", tags="failed", keys=["job-b"], properties={"attempt": "2"}))
        p.send(Message(jobs, b"c", tags="failed", keys=["job-c"], properties={"attempt": "5"}))
        p.send(Message(jobs, b"d", tags="done", keys=["job-d"]))
    finally:
        p.shutdown()
    q = delayed_retry.start(rockafka, node.namesrv_addr, jobs, dead, str(tmp_path / "ckpt"), available_now=True,
                            base_delay_s=1, max_attempts=5, starting_offsets="earliest")
    assert q.awaitTermination(120) and q.exception() is None
    deadline = time.monotonic() + 60
    retried = []
    while len(retried) < 2 and time.monotonic() < deadline:
        retried = source(rockafka, node, jobs, unique("g")).where("tags = 'retry'").collect()
        time.sleep(0.5)
    got = sorted((r.body, r.key, r.properties["attempt"], r.delivery_timestamp is not None) for r in retried)
    assert got == [(b"a", "job-a", "1", True), (b"b", "job-b", "3", True)]
    buried = source(rockafka, node, dead, unique("g")).collect()
    assert [(r.body, r.tags, r.properties["attempt"]) for r in buried] == [(b"c", "dead", "6")]
