"""Loss curves as inline SVG: the mutant's seeds against the reference band.

Generated directly as text (no matplotlib): a few hundred small figures take well under
a second, stay crisp at any zoom and need nothing at view time. Curves are binned onto at
most ``BINS`` points (mean per bin) so a figure stays a few kilobytes.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

import numpy as np

BINS = 100
WIDTH, HEIGHT = 440, 190
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 52, 10, 10, 30
REFERENCE_COLOR = "#2b6cb0"
BAND_COLOR = "#bee3f8"
MUTANT_COLOR = "#c53030"


@dataclass(frozen=True)
class Series:
    steps: np.ndarray
    values: np.ndarray
    label: str = ""


def band_svg(reference: Sequence[Series], mutant: Sequence[Series], *, title: str = "") -> str:
    """One figure: reference median and min-max band, each mutant seed as a red line.

    A mutant curve that hits a non-finite loss ends with a cross at its last finite point.
    """
    curves = [*reference, *mutant]
    max_step = max((float(np.max(c.steps)) for c in curves if c.steps.size), default=0.0)
    if max_step <= 0 and not any(c.steps.size for c in curves):
        return _empty_svg(title, "no loss recorded")
    grid = np.linspace(0.0, max(max_step, 1.0), BINS)
    ref_binned = (
        np.array([_binned(c, max_step) for c in reference]) if reference else np.empty((0, BINS))
    )
    mut_binned = [_binned(c, max_step) for c in mutant]
    plotted = [ref_binned.ravel(), *mut_binned]
    finite = np.concatenate([p[np.isfinite(p)] for p in plotted]) if plotted else np.empty(0)
    if finite.size == 0:
        return _empty_svg(title, "no finite loss recorded")
    log_scale = bool(np.all(finite > 0))
    scale = _Scale(grid[-1], finite, log_scale)
    parts = [_frame(scale, title)]
    if ref_binned.shape[0]:
        with warnings.catch_warnings():
            # Bins no reference run reaches (shorter runs) are all-NaN: they stay gaps.
            warnings.simplefilter("ignore", RuntimeWarning)
            low = np.nanmin(ref_binned, axis=0)
            high = np.nanmax(ref_binned, axis=0)
            median = np.nanmedian(ref_binned, axis=0)
        parts.append(_band(grid, low, high, scale))
        parts.extend(_polylines(grid, median, scale, REFERENCE_COLOR, 1.6, "reference median"))
    for series, binned in zip(mutant, mut_binned):
        parts.extend(_polylines(grid, binned, scale, MUTANT_COLOR, 1.1, series.label, opacity=0.75))
        parts.append(_end_marker(series, scale))
    parts.append("</svg>")
    return "".join(parts)


def _binned(series: Series, max_step: float) -> np.ndarray:
    """Mean of the finite values in each of ``BINS`` step bins. A curve of fewer points
    than bins leaves bins without a sample between two of its points: those are drawn as
    the straight line between them (else a short run is a row of lone dots). NaN before
    the first point, after the last, and where the loss was non-finite (gaps stay gaps)."""
    out = np.full(BINS, np.nan)
    if series.steps.size == 0:
        return out
    ok = np.isfinite(series.values)
    position = series.steps / max(max_step, 1.0) * (BINS - 1)
    every = np.clip(np.rint(position).astype(int), 0, BINS - 1)
    index = every[ok]
    counts = np.bincount(index, minlength=BINS)
    sums = np.bincount(index, weights=series.values[ok], minlength=BINS)
    filled = counts > 0
    out[filled] = sums[filled] / counts[filled]
    sampled = np.bincount(every, minlength=BINS) > 0
    _bridge(out, filled, sampled)
    return out


def _bridge(out: np.ndarray, filled: np.ndarray, sampled: np.ndarray) -> None:
    """Fill each run of unsampled bins lying between two filled bins, linearly."""
    left = -1
    for position in range(BINS):
        if not filled[position]:
            continue
        if left >= 0 and position - left > 1 and not sampled[left + 1 : position].any():
            span = np.arange(left + 1, position)
            out[span] = np.interp(span, [left, position], [out[left], out[position]])
        left = position


class _Scale:
    def __init__(self, max_x: float, values: np.ndarray, log_scale: bool) -> None:
        self.max_x = max_x
        self.log = log_scale
        low, high = float(np.min(values)), float(np.max(values))
        if log_scale:
            low, high = math.log10(low), math.log10(high)
        if high - low < 1e-9:
            low, high = low - 0.5, high + 0.5
        pad = 0.04 * (high - low)
        self.low, self.high = low - pad, high + pad
        self.plot_w = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
        self.plot_h = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM

    def x(self, step: float) -> float:
        return MARGIN_LEFT + step / max(self.max_x, 1e-12) * self.plot_w

    def y(self, value: np.ndarray | float) -> np.ndarray:
        value = np.asarray(value, dtype=float)
        if self.log:
            with np.errstate(all="ignore"):
                value = np.log10(value)
        return MARGIN_TOP + (self.high - value) / (self.high - self.low) * self.plot_h

    def tick_value(self, fraction: float) -> float:
        raw = self.low + fraction * (self.high - self.low)
        return 10**raw if self.log else raw


def _frame(scale: _Scale, title: str) -> str:
    bottom = HEIGHT - MARGIN_BOTTOM
    ticks = []
    for fraction in (0.0, 0.5, 1.0):
        y = MARGIN_TOP + (1 - fraction) * scale.plot_h
        ticks.append(
            f'<line x1="{MARGIN_LEFT - 3}" y1="{y:.1f}" x2="{WIDTH - MARGIN_RIGHT}" y2="{y:.1f}" '
            f'class="grid"/><text x="{MARGIN_LEFT - 5}" y="{y + 3:.1f}" text-anchor="end">'
            f"{scale.tick_value(fraction):.3g}</text>"
        )
    axis_note = "loss (log scale)" if scale.log else "loss"
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="curve" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{escape(title)}">'
        f"<title>{escape(title)}</title>"
        f'<rect x="{MARGIN_LEFT}" y="{MARGIN_TOP}" width="{scale.plot_w}" height="{scale.plot_h}" '
        f'class="plot"/>{"".join(ticks)}'
        f'<text x="{MARGIN_LEFT}" y="{bottom + 14}">0</text>'
        f'<text x="{WIDTH - MARGIN_RIGHT}" y="{bottom + 14}" text-anchor="end">'
        f"{scale.max_x:.0f}</text>"
        f'<text x="{(MARGIN_LEFT + WIDTH) / 2:.0f}" y="{bottom + 26}" text-anchor="middle">'
        f"step &#183; {axis_note}</text>"
    )


def _band(grid: np.ndarray, low: np.ndarray, high: np.ndarray, scale: _Scale) -> str:
    ok = np.isfinite(low) & np.isfinite(high)
    if not ok.any():
        return ""
    xs = [scale.x(x) for x in grid[ok]]
    top, bottom = scale.y(high[ok]), scale.y(low[ok])
    points = [f"{x:.1f},{y:.1f}" for x, y in zip(xs, top)]
    points += [f"{x:.1f},{y:.1f}" for x, y in zip(reversed(xs), bottom[::-1])]
    return f'<polygon points="{" ".join(points)}" fill="{BAND_COLOR}" stroke="none"><title>reference min-max</title></polygon>'


def _polylines(
    grid: np.ndarray,
    values: np.ndarray,
    scale: _Scale,
    color: str,
    width: float,
    label: str,
    opacity: float = 1.0,
) -> list[str]:
    """One polyline per run of consecutive finite points (gaps stay gaps)."""
    ys = scale.y(values)
    ok = np.isfinite(ys)
    lines, segment = [], []
    for x, y, good in zip(grid, ys, ok):
        if good:
            segment.append(f"{scale.x(x):.1f},{min(max(y, -5.0), HEIGHT + 5.0):.1f}")
            continue
        if segment:
            lines.append(segment)
        segment = []
    if segment:
        lines.append(segment)
    title = f"<title>{escape(label)}</title>" if label else ""
    return [
        f'<polyline points="{" ".join(points)}" fill="none" stroke="{color}" '
        f'stroke-width="{width}" stroke-opacity="{opacity}">{title}</polyline>'
        for points in lines
        if len(points) >= 1
    ]


def _end_marker(series: Series, scale: _Scale) -> str:
    """A cross where the loss went non-finite (at the last finite point before it)."""
    bad = ~np.isfinite(series.values)
    if not bad.any():
        return ""
    first_bad = int(np.argmax(bad))
    if first_bad == 0:
        return ""
    step, value = series.steps[first_bad - 1], series.values[first_bad - 1]
    y = float(scale.y(value))
    if not math.isfinite(y):
        return ""
    x = scale.x(step)
    label = escape(f"{series.label}: non-finite loss at step {int(series.steps[first_bad])}")
    return (
        f'<path d="M{x - 4:.1f},{y - 4:.1f}L{x + 4:.1f},{y + 4:.1f}M{x - 4:.1f},{y + 4:.1f}'
        f'L{x + 4:.1f},{y - 4:.1f}" stroke="#742a2a" stroke-width="2"><title>{label}</title></path>'
    )


def _empty_svg(title: str, message: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="curve" viewBox="0 0 {WIDTH} 60" '
        f'width="{WIDTH}" height="60" role="img" aria-label="{escape(title)}">'
        f"<title>{escape(title)}</title>"
        f'<text x="{WIDTH / 2:.0f}" y="34" text-anchor="middle">{escape(message)}</text></svg>'
    )
