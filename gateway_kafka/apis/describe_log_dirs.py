"""DescribeLogDirs (key 35), versions 1-4 — ``kafka-log-dirs --describe``.

One log dir: the store's root directory (every topic shares its commitlog). Per partition: its
size — the bytes of its records still in the commitlog (each stored batch once), read from its
consume queue — offset lag 0 (a single replica is its own high watermark) and never a future
log. v4: total and usable bytes of the file system holding it. Topics null: every visible
topic; unknown topics or partitions are left out, as Kafka does. Needs DESCRIBE on the cluster
(CLUSTER_AUTHORIZATION_FAILED otherwise).
"""

from __future__ import annotations

import os
import shutil

from broker import store_view
from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import blocking, find_topic, local_queue, topic_partition_ids, visible_topics


def partition_size(store, topic: str, queue_id: int) -> int:
    """Bytes of the queue's units still in the commitlog, each batch unit counted once."""
    cq = store.find_consume_queue(topic, queue_id)
    if cq is None:
        return 0
    cl_min = store_view.commitlog_min_offset(store)
    total, last_phy = 0, -1
    index, end = cq.min_offset, cq.max_offset
    while index < end:
        units = cq.read_units(index, 8192)
        if not units:
            break
        for phy, size, _ in units:
            if phy != last_phy and size > 0 and phy >= cl_min:
                total += size
            last_phy = phy
        index += len(units)
    return total


def _describe(gw, wanted) -> dict:
    store = gw.store
    if wanted is None:
        wanted = {name: topic_partition_ids(gw, name, tc) for name, tc in visible_topics(gw).items()}
    topics = []
    for name, indexes in wanted.items():
        if find_topic(gw, name) is None:
            continue
        # this node's log dir holds the partitions its broker group owns (docs/design/cluster.md)
        local = [(i, q) for i in indexes if (q := local_queue(gw, name, i)[0]) is not None]
        parts = [{"partition_index": i, "partition_size": partition_size(store, name, q), "offset_lag": 0,
                  "is_future_key": False} for i, q in local]
        if parts:
            topics.append({"name": name, "partitions": parts})
    usage = shutil.disk_usage(store.root)
    return {"error_code": E.NONE, "log_dir": os.path.abspath(store.root), "topics": topics,
            "total_bytes": usage.total, "usable_bytes": usage.free}


@api(key=35, min=1, max=4)
async def handle(ctx: RequestContext, body: dict) -> dict:
    if not authz.cluster(ctx, authz.Op.DESCRIBE):
        return {"throttle_time_ms": 0, "error_code": E.CLUSTER_AUTHORIZATION_FAILED, "results": []}
    req = body.get("topics")
    wanted = None if req is None else {t.get("topic", ""): list(t.get("partitions") or ()) for t in req}
    result = await blocking(_describe, ctx.gateway, wanted)
    return {"throttle_time_ms": 0, "error_code": E.NONE, "results": [result]}
