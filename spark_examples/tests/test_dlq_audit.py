"""The DLQ audit example (spark_examples/dlq_audit.py) against dead letters a real push consumer
made: a real node, the project's SDK consumer failing some messages, the broker moving them to
``%DLQ%<group>``, and a local[2] Spark job reading them back with the ``rockafka`` source.
"""

from __future__ import annotations

import pytest

from spark_examples.tests.helpers import unique
from tests.support.group import wait_until

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def rockafka(spark):
    import rockafka_spark

    rockafka_spark.register(spark)
    return spark


def test_dlq_audit_names_origin_reconsume_count_and_reason(rockafka, node, tmp_path):
    from gateway_native.client import Admin, ConsumeStatus, Message, Producer, PushConsumer
    from spark_examples import dlq_audit
    from tests.gateway_native.helpers import FAST

    topic, group = unique("orders"), unique("billing")
    with Admin(node.namesrv_addr) as admin:
        admin.create_topic(topic, 2)
    sent = {}
    with Producer(unique("pg"), node.namesrv_addr) as p:
        for i in range(12):
            tag = ("ok", "poison", "flaky")[i % 3]
            sent[f"m{i}"] = (tag, p.send(Message(topic, f"m{i}".encode(), tags=tag, keys=[f"k{i}"])).msg_id)
    deliveries: dict[str, int] = {}

    def listener(msgs, ctx):
        for m in msgs:
            deliveries[m.body.decode()] = deliveries.get(m.body.decode(), 0) + 1
        tag = msgs[0].tags
        if tag == "ok":
            return ConsumeStatus.CONSUME_SUCCESS
        # poison: straight to the DLQ; flaky: one retry after 1 s (delay level 1), then the DLQ
        ctx.delay_level_when_next_consume = -1 if tag == "poison" else 1
        return ConsumeStatus.RECONSUME_LATER

    c = PushConsumer(group, node.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                     consume_message_batch_max_size=1, max_reconsume_times=1, **FAST)
    c.subscribe(topic, "*")
    c.register_message_listener(listener)
    c.start()
    try:
        flaky = [b for b, (t, _) in sent.items() if t == "flaky"]
        wait_until(lambda: all(deliveries.get(b, 0) >= 2 for b in flaky), 60, what="flaky messages retried once")

        def buried() -> int:
            with Admin(node.namesrv_addr) as a:
                mqs = a.message_queues(f"%DLQ%{group}")
                return sum(a.max_offset(mq) for mq in mqs)
        wait_until(lambda: buried() == 8, 60, interval=0.3, what="8 dead letters")
    finally:
        c.shutdown()

    letters = {r.original_message_id: r for r in dlq_audit.dead_letters(rockafka, node.namesrv_addr, group).collect()}
    dead = {mid: (b, t) for b, (t, mid) in sent.items() if t != "ok"}
    assert set(letters) == set(dead)  # every buried message once, none of the consumed ones
    for mid, row in letters.items():
        body, tag = dead[mid]
        assert (row.body.decode(), row.original_topic, row.tags, row.group) == (body, topic, tag, group)
        assert (row.reason, row.reconsume_times) == (("no retry", 1) if tag == "poison" else ("retries exhausted", 2))

    report = dlq_audit.audit_groups(rockafka, node.namesrv_addr, [group, unique("never-failed")])
    rows = sorted((r.original_topic, r.tags, r.reason, r.messages, r.max_reconsume_times, len(r.sample_message_ids))
                  for r in report.collect())
    assert rows == [(topic, "flaky", "retries exhausted", 4, 2, 4), (topic, "poison", "no retry", 4, 1, 4)]

    # the script end to end, JSON out
    assert dlq_audit.main(["--namesrv", node.namesrv_addr, "--group", group, "--out", str(tmp_path / "audit")]) == 0
