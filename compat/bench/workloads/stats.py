"""Repetitions, summaries and Markdown tables for the side-by-side benchmark.

Invariants:
- a cell is either a list of measured values (one per repetition) or a ``Failure`` with the
  reason; a failure never hides the other system's numbers, and a failed repetition among good
  ones is reported next to them (``3 runs, 1 failed: ...``) instead of being dropped silently;
- ratios are Rockafka's median over the peer's median, so > 1 means Rockafka measured more of
  the quantity (better for throughput, worse for latency and recovery time: each table says
  which direction is better);
- nothing here touches the network or the clock; it is pure and tested in
  tests/compat/test_bench_stats.py.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[3])


@dataclass
class Failure:
    """A system, case or repetition that did not produce a number, and why."""

    reason: str

    def short(self, limit: int = 160) -> str:
        text = " ".join(self.reason.split())
        return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class Cell:
    """The repetitions of one case on one system."""

    values: list[float] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)

    def add(self, value: float | Failure) -> None:
        if isinstance(value, Failure):
            self.failures.append(value)
        else:
            self.values.append(float(value))

    def summary(self) -> "Summary | None":
        return summarize(self.values) if self.values else None


@dataclass(frozen=True)
class Summary:
    n: int
    min: float
    median: float
    max: float


def summarize(values: list[float]) -> Summary:
    if not values:
        raise ValueError("no values to summarize")
    return Summary(len(values), min(values), statistics.median(values), max(values))


def ratio(ours: Summary | None, peer: Summary | None) -> float | None:
    """Rockafka median / peer median, or None when either side has no number or the peer's is 0."""
    if ours is None or peer is None or peer.median == 0:
        return None
    return ours.median / peer.median


def fmt_num(x: float) -> str:
    """Three significant figures, thousands separated: 1234567 -> 1,230,000; 0.01234 -> 0.0123."""
    if x == 0:
        return "0"
    mag = abs(x)
    if mag >= 1000:
        digits = len(str(int(mag)))
        return f"{round(x, 3 - digits):,.0f}"
    if mag >= 100:
        return f"{x:.0f}"
    if mag >= 10:
        return f"{x:.1f}"
    if mag >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def fmt_cell(cell: Cell | None) -> str:
    if cell is None:
        return "not run"
    s = cell.summary()
    if s is None:
        if cell.failures:
            return f"FAILED: {cell.failures[0].short()}"
        return "not run"
    text = f"{fmt_num(s.median)} ({fmt_num(s.min)}–{fmt_num(s.max)}, n={s.n})"
    if cell.failures:
        text += f"; {len(cell.failures)} failed: {cell.failures[0].short(80)}"
    return text


def fmt_ratio(r: float | None) -> str:
    return "—" if r is None else f"{r:.2f}"


PEER_LABELS = {"kafka": "Apache Kafka", "rocketmq": "Apache RocketMQ"}


@dataclass
class Table:
    """One workload's table: rows of cases, a Rockafka column, a peer column and the ratio."""

    title: str
    unit: str
    peer: str
    better: str  # "higher" or "lower"
    cells: dict[tuple[str, str], Cell] = field(default_factory=dict)
    cases: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def cell(self, case: str, system: str) -> Cell:
        if case not in self.cases:
            self.cases.append(case)
        return self.cells.setdefault((case, system), Cell())

    def add(self, case: str, system: str, value: float | Failure) -> None:
        self.cell(case, system).add(value)

    def fail_system(self, system: str, reason: str, cases: list[str]) -> None:
        """Mark every listed case of a system failed with one reason (a peer that never started)."""
        for case in cases:
            self.add(case, system, Failure(reason))

    def ratios(self) -> dict[str, float | None]:
        out = {}
        for case in self.cases:
            ours = self.cells.get((case, "rockafka"))
            peer = self.cells.get((case, self.peer))
            out[case] = ratio(ours.summary() if ours else None, peer.summary() if peer else None)
        return out

    def render(self) -> str:
        ratios = self.ratios()
        peer = PEER_LABELS.get(self.peer, self.peer)
        lines = [f"### {self.title}", "",
                 f"Unit: {self.unit}; median (min–max, n = repetitions); {self.better} is better. "
                 f"Ratio = Rockafka median / {peer} median.", "",
                 f"| case | Rockafka | {peer} | ratio |", "|---|---|---|---|"]
        for case in self.cases:
            lines.append(f"| {case} | {fmt_cell(self.cells.get((case, 'rockafka')))} | "
                         f"{fmt_cell(self.cells.get((case, self.peer)))} | {fmt_ratio(ratios[case])} |")
        for note in self.notes:
            lines += ["", note]
        return "\n".join(lines) + "\n"


def top_functions(collapsed: str, n: int = 15) -> tuple[int, list[tuple[str, int, int]]]:
    """Parse py-spy's raw (collapsed) output: ``frame;frame;...;leaf COUNT`` per line.

    Returns (total samples, [(function, self samples, total samples)]) for the n functions with
    the most self samples. A frame is ``name (file:line)``; the line number is dropped so one
    function's lines add up. Total counts a function once per stack even when it recurses.
    """
    self_counts: dict[str, int] = {}
    total_counts: dict[str, int] = {}
    total = 0
    for line in collapsed.splitlines():
        stack, _, count_text = line.rstrip().rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_function_of(f) for f in stack.split(";") if f]
        frames = [f for f in frames if f]
        if not frames:
            continue
        total += count
        self_counts[frames[-1]] = self_counts.get(frames[-1], 0) + count
        for f in set(frames):
            total_counts[f] = total_counts.get(f, 0) + count
    ranked = sorted(self_counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
    return total, [(name, c, total_counts[name]) for name, c in ranked]


def _function_of(frame: str) -> str:
    frame = frame.strip()
    if frame.startswith(("process ", "thread ")):
        return ""  # py-spy's --pid/--threads prefixes are not functions
    name, sep, where = frame.partition(" (")
    if not sep:
        return name
    path = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("/site-packages/", f"{_ROOT}/", "/lib/python3"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{name} ({path})"


def render_profile(title: str, collapsed: str, n: int = 15) -> str:
    total, top = top_functions(collapsed, n)
    if total == 0:
        return f"### {title}\n\nNo samples recorded.\n"
    lines = [f"### {title}", "", f"{total} samples (py-spy, 100 Hz, the thread holding the GIL).", "",
             "| # | function | self % | total % |", "|---|---|---|---|"]
    for i, (name, self_c, tot_c) in enumerate(top, 1):
        lines.append(f"| {i} | `{name}` | {100 * self_c / total:.1f} | {100 * tot_c / total:.1f} |")
    return "\n".join(lines) + "\n"
