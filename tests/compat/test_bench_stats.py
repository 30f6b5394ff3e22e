"""The benchmark harness's pure parts: summaries, ratios, table cells for failed peers, and the
py-spy profile digest. (The benchmark itself is run by `make bench`, never by the tests.)"""

from compat.bench.workloads.stats import (Cell, Failure, Table, fmt_num, render_profile, summarize,
                                          top_functions)


def test_summary_is_min_median_max_over_repetitions():
    s = summarize([30.0, 10.0, 20.0, 1000.0])
    assert (s.n, s.min, s.median, s.max) == (4, 10.0, 25.0, 1000.0)


def test_ratio_is_rockafka_median_over_peer_median():
    t = Table("produce", "records/s", "kafka", "higher")
    for v in (100, 300, 200):
        t.add("1 KiB", "rockafka", v)
    for v in (400, 400, 100):
        t.add("1 KiB", "kafka", v)
    assert t.ratios() == {"1 KiB": 0.5}
    row = [ln for ln in t.render().splitlines() if ln.startswith("| 1 KiB")][0]
    assert row == "| 1 KiB | 200 (100–300, n=3) | 400 (100–400, n=3) | 0.50 |"
    assert "| case | Rockafka | Apache Kafka | ratio |" in t.render()


def test_a_peer_that_never_started_shows_its_reason_and_the_other_side_still_shows():
    t = Table("send", "messages/s", "rocketmq", "higher")
    t.add("sync", "rockafka", 1500)
    t.add("async", "rockafka", 4000)
    t.fail_system("rocketmq", "maven could not resolve rocketmq-broker:5.5.0", ["sync", "async"])
    text = t.render()
    assert "| sync | 1,500 (1,500–1,500, n=1) | FAILED: maven could not resolve rocketmq-broker:5.5.0 | — |" in text
    assert t.ratios() == {"sync": None, "async": None}


def test_failed_repetitions_are_reported_next_to_the_good_ones():
    c = Cell()
    c.add(10.0)
    c.add(Failure("RuntimeError: push got 0 of 6773 messages"))
    c.add(12.0)
    from compat.bench.workloads.stats import fmt_cell

    assert fmt_cell(c) == "11.0 (10.0–12.0, n=2); 1 failed: RuntimeError: push got 0 of 6773 messages"


def test_numbers_keep_three_significant_figures():
    assert [fmt_num(x) for x in (1234567, 45678.9, 123.4, 12.34, 1.234, 0.01234, 0)] == \
        ["1,230,000", "45,700", "123", "12.3", "1.23", "0.0123", "0"]


def test_profile_digest_ranks_self_time_and_counts_recursion_once():
    collapsed = "\n".join([
        "process 1:\"rockafka serve\";run (asyncio/base_events.py:600);handle (gateway_kafka/server.py:10);"
        "crc (engine/message.py:5) 6",
        "process 1:\"rockafka serve\";run (asyncio/base_events.py:600);handle (gateway_kafka/server.py:12);"
        "handle (gateway_kafka/server.py:12) 3",
        "run (asyncio/base_events.py:601) 1",
        "garbage line",
    ])
    total, top = top_functions(collapsed)
    assert total == 10
    assert top[0] == ("crc (engine/message.py)", 6, 6)
    assert top[1] == ("handle (gateway_kafka/server.py)", 3, 9)
    assert top[2] == ("run (asyncio/base_events.py)", 1, 10)
    md = render_profile("produce", collapsed)
    assert "| 1 | `crc (engine/message.py)` | 60.0 | 60.0 |" in md
    assert render_profile("fetch", "").endswith("No samples recorded.\n")
