"""The health trend: rows of ``brain-feed/health.jsonl`` as a table and as an SVG chart."""

from __future__ import annotations

import json
from html import escape
from typing import Any

COLUMNS = (
    ("timestamp", "time", 20),
    ("score", "score", 5),
    ("arcs", "arcs", 6),
    ("signals", "signals", 7),
    ("lessons", "lessons", 7),
    ("edges", "edges", 6),
    ("conscious", "consc", 5),
    ("feed_tokens", "feed", 5),
    ("duration_ms", "ms", 8),
    ("cost_usd", "cost$", 7),
)


def read_rows(text: str) -> tuple[list[dict[str, Any]], list[int]]:
    """The rows of ``health.jsonl``'s text in file order, and the line numbers of lines that are
    not JSON objects."""
    rows: list[dict[str, Any]] = []
    bad: list[int] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            bad.append(number)
            continue
        if isinstance(row, dict):
            rows.append(row)
        else:
            bad.append(number)
    return rows, bad


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


def render_table(rows: list[dict[str, Any]]) -> str:
    header = "  ".join(title.ljust(width) for _, title, width in COLUMNS)
    lines = [header.rstrip(), "  ".join("-" * width for _, _, width in COLUMNS)]
    for row in rows:
        lines.append("  ".join(_fmt(row.get(key)).ljust(width)[: max(width, 20)] for key, _, width in COLUMNS).rstrip())
    return "\n".join(lines) + "\n"


def render_svg(rows: list[dict[str, Any]], width: int = 720, height: int = 300) -> str:
    """Score (0-10, left axis) and arcs / signals (right axis, scaled) over the ticks."""
    pad_l, pad_r, pad_t, pad_b = 48, 48, 28, 40
    plot_w, plot_h = width - pad_l - pad_r, height - pad_t - pad_b
    n = len(rows)

    def x(i: int) -> float:
        return pad_l + (plot_w * i / (n - 1) if n > 1 else plot_w / 2)

    def series(key: str, top: float) -> list[tuple[float, float]]:
        points = []
        for i, row in enumerate(rows):
            value = row.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                points.append((x(i), pad_t + plot_h - plot_h * min(float(value), top) / top if top else 0.0))
        return points

    counts = [float(r.get(k) or 0) for r in rows for k in ("arcs", "signals") if isinstance(r.get(k), int | float)]
    right_top = max([*counts, 1.0])
    lines = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'font-family="sans-serif" font-size="11">',
        '<rect width="100%" height="100%" fill="white"/>',
        f'<text x="{pad_l}" y="16" font-size="13" font-weight="bold">Brain health ({n} ticks)</text>',
        f'<line x1="{pad_l}" y1="{pad_t + plot_h}" x2="{pad_l + plot_w}" y2="{pad_t + plot_h}" stroke="#888"/>',
        f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{pad_t + plot_h}" stroke="#888"/>',
    ]
    for tick in range(0, 11, 2):
        y = pad_t + plot_h - plot_h * tick / 10
        lines.append(f'<text x="{pad_l - 6}" y="{y + 4:.1f}" text-anchor="end">{tick}</text>')
        lines.append(f'<line x1="{pad_l}" y1="{y:.1f}" x2="{pad_l + plot_w}" y2="{y:.1f}" stroke="#eee"/>')
    lines.append(f'<text x="{pad_l + plot_w + 6}" y="{pad_t + 4}">{int(right_top)}</text>')
    colours = {"score": ("#1f77b4", 10.0), "arcs": ("#2ca02c", right_top), "signals": ("#d62728", right_top)}
    legend_x = pad_l + 200
    for key, (colour, top) in colours.items():
        points = series(key, top)
        if len(points) > 1:
            path = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
            lines.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{path}"/>')
        for px, py in points:
            lines.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="2.5" fill="{colour}"/>')
        lines.append(f'<rect x="{legend_x}" y="8" width="10" height="10" fill="{colour}"/>')
        lines.append(f'<text x="{legend_x + 14}" y="17">{escape(key)}</text>')
        legend_x += 80
    if rows:
        first, last = escape(str(rows[0].get("timestamp", ""))), escape(str(rows[-1].get("timestamp", "")))
        lines.append(f'<text x="{pad_l}" y="{height - 12}">{first}</text>')
        lines.append(f'<text x="{pad_l + plot_w}" y="{height - 12}" text-anchor="end">{last}</text>')
    lines.append("</svg>")
    return "\n".join(lines) + "\n"
