"""The practice page: curves.png and a self-contained index.html.

Nothing here may give the answer away: no diff, no operator or category names, and the
symptoms in plain words about the curves ("the loss stays flat"), never about the code.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from html import escape

import numpy as np

from experiments.symptoms import PARTIAL, label_of

# The judge's own words for what is not a label of ``experiments.symptoms.LABELS``.
PLAIN_WORDS = {
    "silent": "no measurable difference from the correct loop",
    "invalid": "the run stops before its first training step",
    "unjudged": "nothing measured how good the trained model is",
    "too_few_seeds": "too few runs of the correct loop to compare against",
}


def plain_symptom(label: str) -> str:
    """A label in neutral words (each label declares its ``hint``)."""
    partial = " (before the run stopped)" if label.endswith(PARTIAL) else ""
    label = label.removesuffix(PARTIAL)
    if label.startswith("crash:"):
        return f"the script stops with {label.split(':', 1)[1]}"
    declared = label_of(label)
    words = declared.hint if declared and declared.hint else None
    return (words or PLAIN_WORDS.get(label) or label.replace("_", " ")) + partial


def plain_symptoms(fractions: Mapping[str, float], n_seeds: int) -> list[str]:
    """``the loss stays flat (3 of 3 seeds)``, most frequent first."""
    ordered = sorted(fractions.items(), key=lambda item: -item[1])
    return [
        f"{plain_symptom(label)} ({round(share * n_seeds)} of {n_seeds} seeds)"
        for label, share in ordered
    ]


Curve = tuple[np.ndarray, np.ndarray]


def curves_png(reference: Sequence[Curve], practice: Sequence[Curve], title: str) -> bytes:
    """Practice loss per seed (red) over the correct loop's min-max band and median (blue)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 3.6), dpi=110)
    if reference:
        grid, low, mid, high = _band(reference)
        axes.fill_between(grid, low, high, color="#bee3f8", label="correct loop (min-max)")
        axes.plot(grid, mid, color="#2b6cb0", linewidth=1.5, label="correct loop (median)")
    for index, (steps, values) in enumerate(practice):
        finite = np.isfinite(values)
        axes.plot(
            steps[finite],
            values[finite],
            color="#c53030",
            linewidth=1,
            alpha=0.8,
            label="practice script" if index == 0 else None,
        )
        if finite.size and not finite.all() and finite.any():
            last = np.flatnonzero(finite)[-1]
            axes.plot(steps[last], values[last], "x", color="#c53030", markersize=8)
    positive = [v[np.isfinite(v)] for _, v in [*reference, *practice]]
    values = np.concatenate(positive) if positive else np.array([])
    if values.size and values.min() > 0 and values.max() / values.min() > 50:
        axes.set_yscale("log")
    axes.set_xlabel("training step (backward call)")
    axes.set_ylabel("training loss")
    axes.set_title(title)
    axes.legend(loc="upper right", fontsize=8)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return buffer.getvalue()


def _band(curves: Sequence[Curve]) -> tuple[np.ndarray, ...]:
    end = min(float(steps.max()) for steps, _ in curves if steps.size)
    grid = np.linspace(0, end, 200)
    stacked = np.vstack([np.interp(grid, steps, values) for steps, values in curves if steps.size])
    return grid, stacked.min(axis=0), np.median(stacked, axis=0), stacked.max(axis=0)


def index_html(
    *,
    loop: str,
    bugs: int,
    level: str,
    source: str,
    png: bytes,
    symptoms: Sequence[str],
    statuses: Sequence[str],
    epochs: int | None,
) -> str:
    """One self-contained page: the task, the script with line numbers, curves, symptoms."""
    numbered = "\n".join(
        f'<span class="n">{number:4d}</span>  {escape(line)}'
        for number, line in enumerate(source.splitlines(), 1)
    )
    image = base64.b64encode(png).decode("ascii")
    items = "\n".join(f"<li>{escape(item)}</li>" for item in symptoms) or "<li>none</li>"
    ended = ", ".join(sorted(set(statuses))) or "not run"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>trainwreck quiz: {escape(loop)}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 980px; margin: 2em auto; color: #1a202c; }}
pre {{ background: #f7fafc; border: 1px solid #e2e8f0; padding: 1em; overflow-x: auto;
       font-size: 13px; line-height: 1.35; }}
.n {{ color: #a0aec0; user-select: none; }}
img {{ max-width: 100%; border: 1px solid #e2e8f0; }}
</style></head><body>
<h1>Debug this training loop</h1>
<p>This script (<code>practice.py</code>, from the <code>{escape(loop)}</code> loop) has
<strong>{bugs}</strong> bugs ({escape(level)} level). Find them, say which ones crash and which
are silent, rank them by impact, and name the check that would confirm each one.
Answer with line numbers, most harmful first; then run <code>trainwreck quiz grade</code>.</p>
<h2>What running it shows</h2>
<p>Runs: {len(statuses)} seeds{f", {epochs} epochs" if epochs else ""}; ended: {escape(ended)}.</p>
<ul>
{items}
</ul>
<img alt="training loss of the practice script against the correct loop" src="data:image/png;base64,{image}">
<h2>The script</h2>
<pre>{numbered}</pre>
</body></html>
"""
