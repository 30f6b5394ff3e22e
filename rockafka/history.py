"""The last hour of a node's throughput and consumer lag, kept in memory for the console charts.

Every ``interval_s`` (10 s by default: 360 points per hour) one sample records the totals of the
produce/consume counters (engine.metrics) and each group's total lag read off the store; rates
are differences between neighbouring samples; per topic, the last two samples give the topics
page its current rates. Nothing is persisted: after a restart the charts
start empty, as a scrape-based dashboard's would for a new target. Groups beyond ``MAX_GROUPS``
(by lag) are left out of a sample so a node with thousands of groups keeps a bounded history.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

import structlog

from engine import metrics

log = structlog.get_logger("rockafka.history")

HOUR_S = 3600
MAX_GROUPS = 20


@dataclass
class Sample:
    at: float                        # wall-clock seconds
    messages_in: float               # counter totals at that moment
    messages_out: float
    bytes_in: float
    bytes_out: float
    lag: dict[str, int] = field(default_factory=dict)  # group -> total lag
    topics: dict[str, tuple[float, float]] = field(default_factory=dict)  # topic -> (messages in, out) totals


def _total(counter: Any) -> float:
    return sum(s.value for fam in counter.collect() for s in fam.samples if s.name.endswith("_total"))


def _per_topic(counter: Any) -> dict[str, float]:
    out: dict[str, float] = {}
    for fam in counter.collect():
        for s in fam.samples:
            if s.name.endswith("_total") and "topic" in s.labels:
                out[s.labels["topic"]] = out.get(s.labels["topic"], 0.0) + s.value
    return out


class History:
    def __init__(self, group_lags: Callable[[], dict[str, int]], interval_s: float = 10.0):
        self.group_lags = group_lags
        self.interval_s = max(0.05, interval_s)
        self.samples: deque[Sample] = deque(maxlen=int(HOUR_S / self.interval_s) + 1)
        self._task: asyncio.Task | None = None

    def take(self) -> Sample:
        lags = self.group_lags()
        top = dict(sorted(lags.items(), key=lambda kv: -kv[1])[:MAX_GROUPS])
        ins, outs = _per_topic(metrics.TOPIC_MESSAGES_IN), _per_topic(metrics.TOPIC_MESSAGES_OUT)
        per_topic = {t: (ins.get(t, 0.0), outs.get(t, 0.0)) for t in set(ins) | set(outs)}
        sample = Sample(time.time(), _total(metrics.TOPIC_MESSAGES_IN), _total(metrics.TOPIC_MESSAGES_OUT),
                        _total(metrics.TOPIC_BYTES_IN), _total(metrics.TOPIC_BYTES_OUT), top, per_topic)
        self.samples.append(sample)
        return sample

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                await loop.run_in_executor(None, self.take)
            except Exception:  # a failed sample leaves a gap in the chart, nothing else
                log.exception("history_sample_failed")
            await asyncio.sleep(self.interval_s)

    def start(self) -> None:
        self._task = asyncio.ensure_future(self.run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass

    def rates(self) -> dict[str, list[tuple[float, float]]]:
        """Per-second rates between neighbouring samples: series name -> [(time, value)]."""
        out: dict[str, list[tuple[float, float]]] = {"messages_in": [], "messages_out": [], "bytes_in": [],
                                                     "bytes_out": []}
        points = list(self.samples)
        for prev, cur in zip(points, points[1:]):
            dt = cur.at - prev.at
            if dt <= 0:
                continue
            for name in out:
                out[name].append((cur.at, max(0.0, (getattr(cur, name) - getattr(prev, name)) / dt)))
        return out

    def topic_rates(self) -> dict[str, tuple[float, float]]:
        """topic -> (messages in per second, out per second) between the last two samples."""
        points = list(self.samples)
        if len(points) < 2 or points[-1].at <= points[-2].at:
            return {}
        prev, cur = points[-2], points[-1]
        dt = cur.at - prev.at
        return {t: (max(0.0, (v[0] - prev.topics.get(t, (0.0, 0.0))[0]) / dt),
                    max(0.0, (v[1] - prev.topics.get(t, (0.0, 0.0))[1]) / dt)) for t, v in cur.topics.items()}

    def lags(self) -> dict[str, list[tuple[float, float]]]:
        """group -> [(time, total lag)] for the groups in the latest sample."""
        points = list(self.samples)
        if not points:
            return {}
        return {g: [(s.at, float(s.lag[g])) for s in points if g in s.lag] for g in points[-1].lag}
