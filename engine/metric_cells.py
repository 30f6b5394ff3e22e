"""Counters and histograms whose updates take no lock: each thread adds to cells of its own, and
a scrape sums them.

prometheus_client's ``Counter.inc`` takes a lock on every call and its ``Histogram.observe``
searches the buckets in Python and takes a lock for the bucket and one for the sum; on the
per-request path of a loaded event loop that was 5-6 % of the loop. Here an update is a
dictionary lookup, a C ``bisect`` for a histogram, and additions to a list.

Why a cell per thread: the series are updated from the event loop and from other threads (the
send queue's store writers, the broker's and the gRPC gateway's store executors, the store's
background threads). ``cell[i] += n`` reads, adds and stores; a switch of the GIL in between
loses another thread's update of the same cell. So a series is ``{thread id: cell}`` and a
thread only ever writes its own cell: no update is lost and none needs a lock.

- A thread adds its cell on its first update of a series (no other thread adds that key).
  Cells are never removed, so a thread that exits leaves its totals in the sum. A thread id is
  reused only after its thread has ended: the new thread takes the cell over as its only
  writer. The C library gives a new thread the stack, and so the id, of one that ended, which
  keeps a series' cells near the most threads the node ran at once.
- A scrape copies a series' cells, then each cell, with single C calls (``dict.copy``,
  ``cell[:]``: the GIL is not released inside them), so it never reads a half-made dictionary
  or cell. Cells only grow, so a counter never goes down from one scrape to the next; an
  update in flight lands in the next scrape, and a histogram observation's count and sum may
  land in different ones (as with prometheus_client).
- Counter values and histogram sums are floats added in call order, as prometheus_client adds
  them, so a series one thread updates renders byte for byte as it did (rounding past 2**53
  included); bucket counts are ints.
- A label set's series is made on its first use (``dict.setdefault``: two threads binding it
  at once share one series) and rendered in that order, so an unused label set adds no series.
  An unlabelled family has its one series from the start, as prometheus_client's do.
"""

from __future__ import annotations

from bisect import bisect_left
from math import inf
from operator import add
from threading import get_ident
from typing import Any, Sequence

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString


class Series(dict):
    """One label set's cells: thread id -> that thread's list of columns (a counter's values,
    or a histogram's bucket counts then its sum). An empty series is falsy: compare to None."""

    __slots__ = ("zero", "bounds")

    def __init__(self, zero: list, bounds: tuple[float, ...]):
        super().__init__()
        self.zero, self.bounds = zero, bounds

    def cell(self) -> list:
        """The calling thread's cell, made on its first update."""
        ident = get_ident()
        cell = self.get(ident)
        if cell is None:
            cell = self[ident] = self.zero[:]
        return cell

    def inc(self, amount: float = 1) -> None:
        """Add ``amount`` to a one-column counter series."""
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        cell = self.get(get_ident())
        if cell is None:
            cell = self.cell()
        cell[0] += amount

    def observe(self, amount: float) -> None:
        """Count ``amount`` in a histogram series: in the first bucket whose bound is >= it (``le``),
        past the last bound in +Inf; and in the sum."""
        cell = self.get(get_ident())
        if cell is None:
            cell = self.cell()
        cell[bisect_left(self.bounds, amount)] += 1
        cell[-1] += amount

    def totals(self) -> list:
        """Each column summed over the threads' cells."""
        totals = self.zero[:]
        for cell in self.copy().values():
            totals = list(map(add, totals, cell[:]))
        return totals


class Table:
    """The series of the families updated together, by label values: ``columns`` counter
    columns, or with ``buckets`` a histogram's bucket counts and sum."""

    def __init__(self, labelnames: Sequence[str] = (), columns: int = 1, buckets: Sequence[float] | None = None):
        self.labelnames = tuple(labelnames)
        self.bounds: tuple[float, ...] = ()
        if buckets is None:
            self.zero: list = [0.0] * columns
        else:
            bounds = [float(b) for b in buckets]
            if bounds != sorted(bounds):
                raise ValueError("Buckets not in sorted order")
            self.bounds = tuple(b for b in bounds if b != inf)
            self.zero = [0] * (len(self.bounds) + 1) + [0.0]
        self.series: dict[tuple[str, ...], Series] = {}
        if not self.labelnames:
            self.labels()

    def labels(self, *values: object) -> Series:
        series = self.series.get(values)  # type: ignore[arg-type]
        if series is None:
            if len(values) != len(self.labelnames):
                raise ValueError(f"Incorrect label count (expected {len(self.labelnames)}, got {values})")
            key = tuple(str(v) for v in values)
            series = self.series.get(key)
            if series is None:
                series = self.series.setdefault(key, Series(self.zero, self.bounds))
        return series

    def remove(self, *values: object) -> None:
        """Drop a label set's series (its counts are lost, as prometheus_client's ``remove``)."""
        self.series.pop(tuple(str(v) for v in values), None)

    def snapshot(self) -> list[tuple[tuple[str, ...], list]]:
        return [(key, series.totals()) for key, series in self.series.copy().items()]


class _Family:
    """One metric family read off a table at scrape, a collector on ``registry``."""

    def __init__(self, name: str, documentation: str, table: Table, registry: Any):
        self.name, self.documentation, self.table = name, documentation, table
        registry.register(self)

    def _family(self) -> Metric:
        raise NotImplementedError

    def _add(self, family: Any, labels: tuple[str, ...], totals: list) -> None:
        raise NotImplementedError

    def describe(self) -> list[Metric]:
        return [self._family()]

    def collect(self) -> list[Metric]:
        family = self._family()
        for labels, totals in self.table.snapshot():
            self._add(family, labels, totals)
        return [family]


class CellCounter(_Family):
    """A counter: ``column`` of its table's series. A one-column table's series is updated with
    ``labels(...).inc(n)`` (``inc(n)`` when unlabelled); a table shared by several counters is
    updated by the helper that owns it, one cell for all of them."""

    def __init__(self, name: str, documentation: str, table: Table, registry: Any, column: int = 0):
        self.column = column
        if not table.labelnames and len(table.zero) == 1:
            self.inc = table.labels().inc
        super().__init__(name, documentation, table, registry)

    def labels(self, *values: object) -> Series:
        if len(self.table.zero) != 1:
            raise TypeError(f"{self.name} shares its table: update it through the table's helper")
        return self.table.labels(*values)

    def _family(self) -> Metric:
        return CounterMetricFamily(self.name, self.documentation, labels=self.table.labelnames)

    def _add(self, family: Any, labels: tuple[str, ...], totals: list) -> None:
        family.add_metric(labels, totals[self.column])


class CellHistogram(_Family):
    """A histogram over a table made with ``buckets``; ``observe(x)`` when unlabelled. Cumulative
    bucket counts and ``_count`` are computed at scrape."""

    def __init__(self, name: str, documentation: str, table: Table, registry: Any):
        self.les = [floatToGoString(b) for b in table.bounds] + ["+Inf"]
        if not table.labelnames:
            self.observe = table.labels().observe
        super().__init__(name, documentation, table, registry)

    def labels(self, *values: object) -> Series:
        return self.table.labels(*values)

    def _family(self) -> Metric:
        return HistogramMetricFamily(self.name, self.documentation, labels=self.table.labelnames)

    def _add(self, family: Any, labels: tuple[str, ...], totals: list) -> None:
        acc, buckets = 0.0, []
        for le, count in zip(self.les, totals):
            acc += count
            buckets.append((le, acc))
        family.add_metric(labels, buckets, totals[-1])


class CellHistogramCount(_Family):
    """A counter that is a histogram table's observation count, so one cell update serves both
    (``rockafka_requests_total`` is ``rockafka_request_duration_seconds_count``)."""

    def _family(self) -> Metric:
        return CounterMetricFamily(self.name, self.documentation, labels=self.table.labelnames)

    def _add(self, family: Any, labels: tuple[str, ...], totals: list) -> None:
        family.add_metric(labels, float(sum(totals[:-1])))
