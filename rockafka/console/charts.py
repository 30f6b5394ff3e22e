"""Line charts as inline SVG, drawn on the server: the console needs no charting library and the
picture is in the HTML a test (or a person without JavaScript) gets.

``line_chart(series, now)`` plots each series' (unix time, value) points over the hour before
``now``: x is time (-60 min .. now), y starts at 0 and ends at a rounded maximum, labelled.
"""

from __future__ import annotations

import math
from html import escape

WIDTH, HEIGHT = 640, 180
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 12, 24
COLORS = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563", "#ca8a04")
SPAN_S = 3600


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    exp = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * exp:
            return step * exp
    return 10 * exp


def _label(value: float) -> str:
    if value >= 1e6:
        return f"{value / 1e6:g}M"
    if value >= 1e3:
        return f"{value / 1e3:g}k"
    return f"{value:g}"


def line_chart(series: dict[str, list[tuple[float, float]]], now: float, title: str, unit: str = "") -> str:
    top = _nice_max(max((v for pts in series.values() for _t, v in pts), default=0.0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def xy(t: float, v: float) -> str:
        x = LEFT + plot_w * min(1.0, max(0.0, 1 - (now - t) / SPAN_S))
        y = TOP + plot_h * (1 - v / top)
        return f"{x:.1f},{y:.1f}"

    parts = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}" '
             f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>']
    for frac in (0, 0.5, 1):
        y = TOP + plot_h * (1 - frac)
        parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" class="grid"/>'
                     f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_label(top * frac)}{escape(unit)}</text>')
    for minutes in (60, 45, 30, 15, 0):
        x = LEFT + plot_w * (1 - minutes / 60)
        parts.append(f'<text x="{x:.1f}" y="{HEIGHT - 6}" text-anchor="middle">'
                     f'{"now" if minutes == 0 else f"-{minutes}m"}</text>')
    for i, (name, pts) in enumerate(sorted(series.items())):
        color = COLORS[i % len(COLORS)]
        recent = [(t, v) for t, v in pts if now - t <= SPAN_S]
        if len(recent) >= 2:
            parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" data-series="{escape(name)}" '
                         f'points="{" ".join(xy(t, v) for t, v in recent)}"/>')
        elif recent:
            parts.append(f'<circle r="3" fill="{color}" data-series="{escape(name)}" '
                         f'cx="{xy(*recent[0]).split(",")[0]}" cy="{xy(*recent[0]).split(",")[1]}"/>')
    parts.append("</svg>")
    legend = "".join(f'<span class="legend"><i style="background:{COLORS[i % len(COLORS)]}"></i>{escape(name)}</span>'
                     for i, name in enumerate(sorted(series)))
    return f'<figure class="chart-box"><figcaption>{escape(title)}</figcaption>{"".join(parts)}' \
           f'<div class="legends">{legend or "<em>no data yet</em>"}</div></figure>'
