"""The strength plot: setting vs the outcome metric, the reference band, the thresholds."""

from __future__ import annotations

from pathlib import Path

from experiments.strength.search import Result


def write_plot(result: Result, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    axis = result.axis
    points = [p for p in result.points if p.metric is not None]
    figure, ax = plt.subplots(figsize=(6.4, 4.0))
    labels = [str(p.value) for p in points]
    x = [p.value if axis.numeric else labels.index(str(p.value)) for p in points]
    if result.band is not None:
        band = result.band
        ax.axhspan(
            band.center - band.half_width,
            band.center + band.half_width,
            color="tab:green",
            alpha=0.15,
            label=f"reference {band.metric} +- 3 spreads",
        )
        ax.axhline(band.center, color="tab:green", linewidth=1)
    colours = ["tab:red" if p.shows_outcome else "tab:blue" for p in points]
    ax.scatter(x, [p.metric for p in points], c=colours, zorder=3)
    for found, style, name in (
        (result.outcome.threshold, "-", "shows in the outcome"),
        (result.symptom.threshold, ":", "shows in a symptom"),
    ):
        if found is not None and axis.numeric:
            ax.axvline(found, color="black", linestyle=style, label=f"{name}: {found:.3g}")
    if axis.numeric:
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # no crowded labels
        if axis.direction == "down":
            ax.invert_xaxis()  # stronger to the right, as for "up"
    else:
        ax.set_xticks(range(len(labels)), labels)
    ax.set_xlabel(f"{axis.param} ({axis.direction}: stronger to the right)")
    ax.set_ylabel(result.band.metric if result.band else "outcome metric")
    ax.set_title(f"{axis.operator}: weakest setting that shows (red: shows in the outcome)")
    ax.legend(fontsize=7, loc="best")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
