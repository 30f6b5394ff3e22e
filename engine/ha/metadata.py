"""Metadata a slave copies from its master (RocketMQ's SlaveSynchronize, over the HA connection).

Everything in the commitlog reaches a slave by replication; these documents live beside it, in
``config/``, and are sent as METADATA frames (name + JSON) when a slave connects and then
whenever they changed (checked every ``haSyncMetadataInterval`` ms):

| name | master's source | applied on the slave as |
|---|---|---|
| ``topics`` | topics.json | the master's table replaces the slave's |
| ``subscriptionGroups`` | subscriptionGroup.json | replaces |
| ``delayOffsets`` | delayOffset.json | replaces (delay levels' delivery progress) |
| ``timerCheckpoint`` | timerCheckpoint.json | the master's read time (delivery progress) only; the slave files replicated timer messages into its own wheel |
| ``queueMinOffsets`` | queueMinOffset.json | low watermarks are raised, never lowered |

The documents are the managers' own ``encode()`` forms, so no second format exists. Consumer
offsets of both protocols are records of ``__consumer_offsets`` (docs/design/coordinator-state.md):
they reach a slave with the log, and its table follows them (``ConsumerOffsetManager.catch_up``);
an offset a consumer committed to the slave alone, while the master was away, stays until a
record of the master's for that key arrives.
"""

from __future__ import annotations

import json
from typing import Any

import structlog

log = structlog.get_logger("rockafka.engine.ha")

DOCUMENTS = ("topics", "subscriptionGroups", "delayOffsets", "timerCheckpoint", "queueMinOffsets")


def _manager(store: Any, name: str) -> Any:
    return {
        "topics": store.topic_config,
        "subscriptionGroups": store.subscription_groups,
        "delayOffsets": store.schedule.offsets,
        "timerCheckpoint": store.timer.checkpoint,
        "queueMinOffsets": store.min_offsets,
    }[name]


def collect(store: Any) -> dict[str, bytes]:
    """Every document as the bytes a METADATA frame carries."""
    out = {}
    for name in DOCUMENTS:
        mgr = _manager(store, name)
        with mgr.lock:
            doc = mgr.encode()
        out[name] = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode("utf-8")
    return out


def apply(store: Any, name: str, doc: dict[str, Any]) -> None:
    """Apply one document received from the master; unknown names are ignored (a newer master)."""
    if name not in DOCUMENTS:
        log.info("ha_metadata_unknown", name=name)
        return
    mgr = _manager(store, name)
    try:
        if name == "timerCheckpoint":
            with mgr.lock:
                read_time = int(doc.get("readTimeMs", -1))
                if read_time > mgr.read_time_ms:
                    mgr.read_time_ms = read_time
                mgr.max_step_ms = max(mgr.max_step_ms, int(doc.get("maxStepMs", -1)))
            mgr.persist()
            return
        if name == "queueMinOffsets":
            table = {str(k): int(v) for k, v in (doc.get("minOffsetTable") or {}).items()}
            with mgr.lock:
                changed = False
                for key, low in table.items():
                    if low > mgr.table.get(key, 0):
                        mgr.table[key] = low
                        changed = True
                if changed:
                    mgr.persist()
            # also when unchanged: a watermark that arrived before its queue's units did is
            # applied once the dispatcher has built them (the master resends every document
            # now and then, see master.FULL_RESEND_INTERVALS)
            store.apply_min_offsets()
            return
        with mgr.lock:
            mgr.decode(doc)
            if name == "topics":
                mgr.data_version.next()  # the broker re-registers its (now updated) topics
            mgr.persist()
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        log.warning("ha_metadata_rejected", name=name, error=str(exc))
