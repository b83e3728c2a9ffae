"""Inline SVG plots for the HTML report, built as strings (no plotting library, no external files).

Every label that may come from a fixture, a model name or a spec is escaped here; numbers are
formatted here. Each plot carries a <title> so screen readers and tooltips name what it shows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

STATE_COLOURS = {
    "MODEL_PASS": "#2e7d32",
    "MODEL_FAIL": "#c62828",
    "PROVIDER_BLOCK": "#6a1b9a",
    "INFRA_ERROR": "#ef6c00",
    "INVALID_TEST": "#5d4037",
    "GRADER_DISPUTE": "#f9a825",
    "UNFINISHED": "#9e9e9e",
}
FONT = 'font-family="system-ui, sans-serif" font-size="12"'


def _svg(width: int, height: int, title: str, body: list[str]) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" {FONT}><title>{escape(title)}</title>'
            + "".join(body) + "</svg>")


def _text(x: float, y: float, text: str, anchor: str = "start", extra: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" {extra}>{escape(text)}</text>'


def pass_rate_whiskers(items: Sequence[tuple[str, float | None, Sequence[float] | None, int]], title: str) -> str:
    """One bar per (label, pass rate, [low, high], n), with the exact 95% interval as a whisker."""
    bar_w, left, top, plot_h = 34, 44, 24, 220
    # Each slot is wide enough for its label (about 7 px per character at 12 px).
    slot = max([bar_w + 14, *[7 * len(label) + 10 for label, *_ in items]])
    width = left + max(1, len(items)) * slot + 20
    height = top + plot_h + 50
    body = []
    for tick in (0, 0.25, 0.5, 0.75, 1.0):
        y = top + plot_h * (1 - tick)
        body.append(f'<line x1="{left}" x2="{width - 10}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        body.append(_text(left - 6, y + 4, f"{tick:.0%}", "end"))
    for i, (label, rate, ci, n) in enumerate(items):
        x = left + (slot - bar_w) / 2 + i * slot
        cx = x + bar_w / 2
        if rate is None:
            body.append(_text(cx, top + plot_h - 4, "n=0", "middle", 'fill="#777"'))
        else:
            h = plot_h * rate
            body.append(f'<rect x="{x:.1f}" y="{top + plot_h - h:.1f}" width="{bar_w}" height="{h:.1f}" '
                        f'fill="#1565c0" opacity="0.8"><title>{escape(label)}: {rate:.1%} (n={n})</title></rect>')
        if ci is not None:
            y_low, y_high = top + plot_h * (1 - ci[0]), top + plot_h * (1 - ci[1])
            body.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y_low:.1f}" y2="{y_high:.1f}" stroke="#000"/>')
            for y in (y_low, y_high):
                body.append(f'<line x1="{cx - 6:.1f}" x2="{cx + 6:.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="#000"/>')
        body.append(_text(cx, top + plot_h + 16, label, "middle"))
        body.append(_text(cx, top + plot_h + 30, f"n={n}", "middle", 'fill="#555"'))
    return _svg(width, height, title, body)


def _heat_colour(rate: float | None) -> str:
    if rate is None:
        return "#eeeeee"
    # Single-hue scale (light to dark blue) so it reads without colour vision; text carries the number.
    light = 92 - 57 * rate
    return f"hsl(210, 70%, {light:.0f}%)"


def heat_map(rows: Sequence[str], cols: Sequence[str], cells: Mapping[tuple[str, str], tuple[float | None, str]],
             title: str) -> str:
    """Rows x columns of pass rates; each cell shows its text (e.g. '3/4') and is coloured by rate."""
    cw, ch, left, top = 86, 30, 150, 26
    width, height = left + cw * len(cols) + 10, top + ch * len(rows) + 10
    body = [_text(left + cw * j + cw / 2, top - 8, c, "middle", 'font-weight="bold"') for j, c in enumerate(cols)]
    for i, r in enumerate(rows):
        y = top + ch * i
        body.append(_text(left - 8, y + ch / 2 + 4, r, "end"))
        for j, c in enumerate(cols):
            rate, text = cells.get((r, c), (None, "-"))
            x = left + cw * j
            body.append(f'<rect x="{x}" y="{y}" width="{cw - 2}" height="{ch - 2}" fill="{_heat_colour(rate)}">'
                        f'<title>{escape(r)} / {escape(c)}: {escape(text)}</title></rect>')
            ink = "#fff" if rate is not None and rate > 0.55 else "#000"
            body.append(_text(x + cw / 2 - 1, y + ch / 2 + 3, text, "middle", f'fill="{ink}"'))
    return _svg(width, height, title, body)


def stacked_states(groups: Sequence[tuple[str, Mapping[str, int]]], title: str) -> str:
    """One horizontal bar per group, split by result state (every state visible, none folded in)."""
    left, top, bar_h, gap, plot_w = 150, 10, 22, 10, 600
    height = top + len(groups) * (bar_h + gap) + 40
    width = left + plot_w + 20
    body = []
    for i, (label, counts) in enumerate(groups):
        y = top + i * (bar_h + gap)
        total = sum(counts.values()) or 1
        x = float(left)
        body.append(_text(left - 8, y + bar_h / 2 + 4, label, "end"))
        for state, colour in STATE_COLOURS.items():
            n = counts.get(state, 0)
            if not n:
                continue
            w = plot_w * n / total
            body.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{colour}">'
                        f'<title>{escape(label)}: {state} {n}</title></rect>')
            if w > 22:
                body.append(_text(x + w / 2, y + bar_h / 2 + 4, str(n), "middle", 'fill="#fff"'))
            x += w
    ly = top + len(groups) * (bar_h + gap) + 14
    lx = float(left)
    for state, colour in STATE_COLOURS.items():
        body.append(f'<rect x="{lx:.1f}" y="{ly - 9}" width="10" height="10" fill="{colour}"/>')
        body.append(_text(lx + 14, ly, state, "start", 'font-size="10"'))
        lx += 14 + 7 * len(state) + 12
    return _svg(max(width, int(lx) + 10), height, title, body)


def value_bars(items: Sequence[tuple[str, float | None]], title: str, unit: str = "") -> str:
    """Plain vertical bars (e.g. mean output tokens by condition); None shows as 'n/a'."""
    bar_w, gap, left, top, plot_h = 40, 18, 20, 20, 180
    peak = max([v for _, v in items if v is not None] or [1.0]) or 1.0
    width = left + max(1, len(items)) * (bar_w + gap) + 20
    body = []
    for i, (label, value) in enumerate(items):
        x = left + i * (bar_w + gap)
        cx = x + bar_w / 2
        if value is None:
            body.append(_text(cx, top + plot_h - 4, "n/a", "middle", 'fill="#777"'))
        else:
            h = plot_h * value / peak
            body.append(f'<rect x="{x}" y="{top + plot_h - h:.1f}" width="{bar_w}" height="{h:.1f}" fill="#00838f">'
                        f'<title>{escape(label)}: {value:.1f}{escape(unit)}</title></rect>')
            body.append(_text(cx, top + plot_h - h - 4, f"{value:.0f}", "middle"))
        body.append(_text(cx, top + plot_h + 16, label, "middle"))
    return _svg(width, top + plot_h + 30, title, body)
