"""The paired comparisons as a forest plot: one row per comparison, the difference in pass rate
(first minus second condition, in percentage points: scoring/units.py) as a point with its interval,
and the zero line. Inline SVG, labels
escaped (model labels come from the spec)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from afpbench.scoring.units import points, points_interval
from afpbench.workers.results.summary import PairedComparison

FONT = 'font-family="system-ui, sans-serif" font-size="12"'


def _x(d: float, left: float, width: float) -> float:
    return left + (max(-1.0, min(1.0, d)) + 1.0) / 2.0 * width


def forest_plot(rows: Sequence[PairedComparison], multi_model: bool) -> str:
    """Differences range over [-1, 1]; the axis is fixed so plots of two sweeps read alike."""
    label_w, plot_w, right_w, row_h, top = 190, 460, 320, 26, 30
    height = top + row_h * max(1, len(rows)) + 34
    width = label_w + plot_w + right_w
    body = [f'<title>paired differences in pass rate with 95% intervals ({len(rows)} comparisons)</title>']
    for tick in (-1.0, -0.5, 0.0, 0.5, 1.0):
        x = _x(tick, label_w, plot_w)
        colour, dash = ("#000", "") if tick == 0 else ("#ddd", ' stroke-dasharray="3,3"')
        body.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top - 8}" y2="{height - 26}" stroke="{colour}"{dash}/>')
        body.append(f'<text x="{x:.1f}" y="{height - 10}" text-anchor="middle">{points(tick, 0)}</text>')
    body.append(f'<text x="{label_w + plot_w / 2:.1f}" y="14" text-anchor="middle" fill="#555">'
                "difference in pass rate (first minus second, percentage points), exact McNemar p beside it</text>")
    for i, r in enumerate(rows):
        y = top + row_h * i + row_h / 2
        label = (f"{r.model}: " if multi_model else "") + r.comparison
        lo, hi = r.difference_ci95
        x_lo, x_hi, x_d = (_x(v, label_w, plot_w) for v in (lo, hi, r.difference))
        colour = "#2e7d32" if lo > 0 else "#c62828" if hi < 0 else "#1565c0"
        reading = f"{points(r.difference)} [{points_interval(lo, hi)}] p={r.p_value:.3g} n={r.n_pairs}"
        body += [
            f'<text x="{label_w - 8}" y="{y + 4:.1f}" text-anchor="end">{escape(label)}</text>',
            f'<line x1="{x_lo:.1f}" x2="{x_hi:.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="{colour}" stroke-width="2"/>',
            *(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y - 5:.1f}" y2="{y + 5:.1f}" stroke="{colour}"/>'
              for x in (x_lo, x_hi)),
            f'<circle cx="{x_d:.1f}" cy="{y:.1f}" r="5" fill="{colour}"><title>{escape(label)}: '
            f"{escape(reading)}</title></circle>",
            f'<text x="{label_w + plot_w + 10}" y="{y + 4:.1f}">{escape(reading)}</text>',
        ]
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" {FONT} class="forest">' + "".join(body) + "</svg>")
