"""KIP-227's rules on the fetch-session cache itself (``gateway_kafka/fetch_sessions.py``): the
error a client gets for each wrong (session id, epoch), what an incremental answer keeps, and
the cache bound. The real-client side is ``test_kafka_fetch_sessions.py``."""

from __future__ import annotations

from types import SimpleNamespace

from gateway_kafka import error_codes as E
from gateway_kafka.apis._common import topic_id
from gateway_kafka.fetch_sessions import FetchSessions


class _Topics:
    data_version = SimpleNamespace(counter=1)

    def all(self):
        return {"t": None, "u": None}


def sessions(slots: int = 1000, eviction_ms: int = 120_000) -> FetchSessions:
    extra = {"max_incremental_fetch_session_cache_slots": slots, "min_incremental_fetch_session_eviction_ms": eviction_ms}
    config = SimpleNamespace(extra_int=lambda key, default: extra.get(key, default))
    return FetchSessions(SimpleNamespace(config=config, store=SimpleNamespace(topic_config=_Topics())))


def request(session_id: int, epoch: int, parts=(("t", 0, 5),), forgotten=()) -> dict:
    topics = {}
    for name, index, offset in parts:
        topics.setdefault(name, []).append({"partition": index, "fetch_offset": offset, "partition_max_bytes": 1000})
    return {"session_id": session_id, "session_epoch": epoch,
            "topics": [{"topic_id": topic_id(n), "partitions": p} for n, p in topics.items()],
            "forgotten_topics_data": [{"topic_id": topic_id(n), "partitions": [i]} for n, i in forgotten]}


def answer(name: str, index: int, hw: int, records: bytes = b"") -> dict:
    return {"topic": name, "partitions": [{"partition_index": index, "error_code": 0, "high_watermark": hw,
                                           "last_stable_offset": hw, "log_start_offset": 0, "records": records,
                                           "preferred_read_replica": -1}]}


def test_session_epochs_and_errors():
    fs = sessions()
    ctx = fs.open(request(0, 0, (("t", 0, 5), ("u", 1, 0))), 17)
    assert ctx.error == E.NONE and not ctx.incremental
    sid, out = ctx.respond([answer("t", 0, 10, b"x"), answer("u", 1, 3)])
    assert sid != 0 and len(out) == 2 and out[0]["topic_id"] == topic_id("t")
    assert fs.open(request(sid + 1, 1), 17).error == E.FETCH_SESSION_ID_NOT_FOUND
    assert fs.open(request(sid, 2), 17).error == E.INVALID_FETCH_SESSION_EPOCH
    assert fs.open(request(sid, 1), 12).error == E.FETCH_SESSION_TOPIC_ID_ERROR   # by name now

    ctx = fs.open(request(sid, 1, ()), 17)   # nothing changed on the client side: the session's partitions
    assert ctx.incremental and sorted((t["topic"], len(t["partitions"])) for t in ctx.topics) == [("t", 1), ("u", 1)]
    sid2, out = ctx.respond([answer("t", 0, 10), answer("u", 1, 4)])   # only u moved
    assert sid2 == sid and [(t["topic"], [p["partition_index"] for p in t["partitions"]]) for t in out] == [("u", [1])]
    assert fs.open(request(sid, 1, ()), 17).error == E.INVALID_FETCH_SESSION_EPOCH   # epoch 1 was used

    ctx = fs.open(request(sid, 2, (), forgotten=(("u", 1),)), 17)
    assert [t["topic"] for t in ctx.topics] == ["t"]
    ctx.respond([answer("t", 0, 10)])

    ctx = fs.open(request(sid, -1), 17)   # final: closes the session, full fetch without one
    assert ctx.respond([answer("t", 0, 10)])[0] == 0 and sid not in fs.sessions


def test_unknown_topic_id_and_the_cache_bound():
    fs = sessions(slots=1)
    body = request(0, 0)
    body["topics"].append({"topic_id": topic_id("gone"), "partitions": [{"partition": 0, "fetch_offset": 0}]})
    ctx = fs.open(body, 17)
    sid, out = ctx.respond([answer("t", 0, 10)])
    assert [p["error_code"] for t in out for p in t["partitions"]] == [0, E.UNKNOWN_TOPIC_ID]
    # a session of the same size does not evict the recent one: no session for the newcomer
    assert fs.open(request(0, 0, (("t", 0, 0), ("u", 0, 0))), 17).respond([])[0] == 0
    assert len(fs.sessions) == 1
    small = sessions(slots=1)
    first = small.open(request(0, 0), 17).respond([answer("t", 0, 1)])[0]
    second = small.open(request(0, 0, (("t", 0, 0), ("u", 0, 0))), 17).respond([])[0]   # bigger: evicts
    assert second != 0 and list(small.sessions) == [second]
    assert small.open(request(first, 1), 17).error == E.FETCH_SESSION_ID_NOT_FOUND


def test_sessionless_fetches_by_id_and_by_name():
    fs = sessions()
    body = request(0, -1)   # librdkafka: Fetch 16, no session
    body["topics"].append({"topic_id": topic_id("gone"), "partitions": [{"partition": 3, "fetch_offset": 0}]})
    ctx = fs.open(body, 16)
    assert [t["topic"] for t in ctx.topics] == ["t"] and not fs.sessions
    sid, out = ctx.respond([answer("t", 0, 10)])
    assert sid == 0 and [(t["topic_id"], [p["error_code"] for p in t["partitions"]]) for t in out] == \
        [(topic_id("t"), [0]), (topic_id("gone"), [E.UNKNOWN_TOPIC_ID])]
    by_name = {"topics": [{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 1}]}]}
    ctx = fs.open(by_name, 4)   # before sessions existed
    assert ctx.topics == by_name["topics"] and ctx.respond([answer("t", 0, 10)])[0] == 0
