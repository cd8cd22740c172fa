"""Heatmaps of score over hidden slots x decoy budget, one per domain and tool-failure rate
(needs the ``plot`` extra).

Drawn with matplotlib's object API on an Agg canvas (no pyplot state, no display needed), with
fixed margins in inches (sized for the wrapped title, tick labels and colorbar, so nothing is
clipped) rather than a layout engine, which would lay the figure out again on every save. Each
cell shows its score and episode count; a cell without episodes is hatched and marked with a
dash. Saved as PNG at :data:`PNG_DPI` dots per inch by default; PDF and SVG (vector, for papers)
on request (:data:`HEATMAP_FORMATS`).
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ace_gym.atomic import write_atomic
from ace_gym.errors import choice
from ace_gym.eval.summary import dataset_label, score_grid
from ace_gym.stats import mean

if TYPE_CHECKING:
    from matplotlib.figure import Figure

HEATMAP_FORMATS = ("png", "pdf", "svg")
DEFAULT_HEATMAP_FORMATS = ("png",)
PNG_DPI = 150
_TITLE_SIZE = 9.0
_LINE = 1.3 / 72  # inches per point of font size, for one line of text
# inches: beside the axes (tick labels, axis labels), above the title, between title and axes (the
# colorbar's top tick label), the colorbar's width, the gap before it, and what its tick labels
# and label take on the right
_MARGINS = {"left": 0.62, "bottom": 0.52, "top": 0.12, "gap": 0.12, "pad": 0.15, "bar": 0.15, "right": 0.72}
_NO_TIMESTAMP = {"pdf": {"CreationDate": None}, "svg": {"Date": None}, "png": {}}  # same summary, same bytes


def matplotlib_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def heatmap_name(domain: str, failure_rate: str) -> str:
    """File stem of one heatmap: ``heatmap_<domain>_failure<rate>``."""
    return f"heatmap_{domain}_failure{failure_rate}"


def heatmap_figure(summary: Mapping[str, Any], domain: str, failure_rate: str) -> Figure:
    """The heatmap of one domain at one tool-failure rate (a key of ``summary["cells_by_failure_rate"]``)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    hidden, budgets, scores, counts = score_grid(summary, domain, failure_rate)
    width = max(3.8, 1.8 + 0.62 * len(budgets))
    height = max(3.0, 1.6 + 0.5 * len(hidden))
    figure = Figure(figsize=(width, height))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    values = [[float("nan") if v is None else v for v in row] for row in scores]
    image = axes.imshow(values, vmin=0.0, vmax=1.0, cmap="viridis", origin="lower", aspect="auto")
    axes.set_xticks(range(len(budgets)), [str(b) for b in budgets])
    axes.set_yticks(range(len(hidden)), [str(h) for h in hidden])
    axes.set_xlabel("decoy budget B")
    axes.set_ylabel("hidden slots H")
    cell_font = 7.0 if len(budgets) > 6 else 8.0
    for r, row in enumerate(scores):
        for c, value in enumerate(row):
            if value is None:
                axes.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, hatch="///", edgecolor="0.75", lw=0))
                axes.text(c, r, "\u2013", ha="center", va="center", fontsize=2 * cell_font, color="0.35")
                continue
            color = "black" if value > 0.6 else "white"
            text = f"{value:.2f}\nn={counts[r][c]}"
            axes.text(c, r, text, ha="center", va="center", fontsize=cell_font, color=color, linespacing=1.1)
    present = [v for row in scores for v in row if v is not None]
    score = mean(present)
    characters = int(width * 72 / (_TITLE_SIZE * 0.6))  # a line of the title fits the figure's width
    title = [
        str(summary.get("policy")),
        f"{domain} ({dataset_label(summary, domain)}), tool-failure rate {failure_rate}: "
        f"score {score:.3f} over {sum(map(sum, counts))} episodes",
        "n = episodes in the cell, \u2013 = no episodes",
    ]
    wrapped = "\n".join(textwrap.fill(line, characters, break_long_words=True) for line in title)
    figure.suptitle(wrapped, fontsize=_TITLE_SIZE, y=1 - _MARGINS["top"] / 2 / height, va="top")
    top = height - _MARGINS["top"] - (wrapped.count("\n") + 1) * _TITLE_SIZE * _LINE - _MARGINS["gap"]
    bar_left = width - _MARGINS["right"] - _MARGINS["bar"]
    axes.set_position(_rect(_MARGINS["left"], _MARGINS["bottom"], bar_left - _MARGINS["pad"], top, width, height))
    bar = figure.add_axes(_rect(bar_left, _MARGINS["bottom"], bar_left + _MARGINS["bar"], top, width, height))
    figure.colorbar(image, cax=bar, label="score (share solved)")
    return figure


def _rect(left: float, bottom: float, right: float, top: float, width: float, height: float) -> list[float]:
    """A rectangle given in inches as figure fractions ``[left, bottom, width, height]``."""
    return [left / width, bottom / height, (right - left) / width, (top - bottom) / height]


def write_heatmaps(
    summary: Mapping[str, Any], out_dir: str | Path, formats: Sequence[str] = DEFAULT_HEATMAP_FORMATS
) -> list[Path]:
    """Write ``<heatmap_name>.<format>`` for every domain and tool-failure rate of ``summary``
    and every one of ``formats`` (of :data:`HEATMAP_FORMATS`) into ``out_dir``, each atomically,
    and remove that heatmap's files in the other formats (left by an earlier report, they would
    show older scores); returns the paths written. Raises ImportError when matplotlib is missing
    (``pip install ".[plot]"``)."""
    from matplotlib import rc_context

    for fmt in formats:
        choice("heatmap format", fmt, HEATMAP_FORMATS)
    out_dir = Path(out_dir)
    paths = []
    for domain in summary["per_domain"]:
        for rate, cells in summary["cells_by_failure_rate"].items():
            if not any(c["domain"] == domain for c in cells):
                continue
            figure = heatmap_figure(summary, domain, rate)
            for fmt in HEATMAP_FORMATS:
                path = out_dir / f"{heatmap_name(domain, rate)}.{fmt}"
                if fmt not in formats:
                    path.unlink(missing_ok=True)
                    continue
                with rc_context({"svg.hashsalt": path.name}):  # SVG element ids from the name, not at random
                    write_atomic(path, partial(figure.savefig, format=fmt, dpi=PNG_DPI, metadata=_NO_TIMESTAMP[fmt]))
                paths.append(path)
    return paths
