"""Heatmaps of score over hidden slots x decoy budget, one per domain and tool-failure rate
(needs the ``plot`` extra).

Drawn with matplotlib's object API on an Agg canvas (no pyplot state, no display needed), with
constrained layout and a title wrapped to the figure's width so nothing is clipped. Each cell
shows its score and episode count; a cell without episodes is hatched and marked with a dash.
Saved as PNG at :data:`PNG_DPI` dots per inch, and as PDF and SVG (vector, for papers).
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ace_gym.atomic import write_atomic
from ace_gym.eval.summary import dataset_label, score_grid
from ace_gym.stats import mean

if TYPE_CHECKING:
    from matplotlib.figure import Figure

HEATMAP_FORMATS = ("png", "pdf", "svg")
PNG_DPI = 300
_TITLE_SIZE = 9.0
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
    figure = Figure(figsize=(width, max(3.0, 1.6 + 0.5 * len(hidden))), layout="constrained")
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
    figure.colorbar(image, ax=axes, label="score (share solved)")
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
    figure.suptitle(wrapped, fontsize=_TITLE_SIZE)
    return figure


def write_heatmaps(summary: Mapping[str, Any], out_dir: str | Path) -> list[Path]:
    """Write ``<heatmap_name>.{png,pdf,svg}`` for every domain and tool-failure rate of
    ``summary`` into ``out_dir``, each atomically; returns the paths. Raises ImportError when
    matplotlib is missing (``pip install ".[plot]"``)."""
    from matplotlib import rc_context

    out_dir = Path(out_dir)
    paths = []
    for domain in summary["per_domain"]:
        for rate, cells in summary["cells_by_failure_rate"].items():
            if not any(c["domain"] == domain for c in cells):
                continue
            figure = heatmap_figure(summary, domain, rate)
            for fmt in HEATMAP_FORMATS:
                path = out_dir / f"{heatmap_name(domain, rate)}.{fmt}"
                with rc_context({"svg.hashsalt": path.name}):  # SVG element ids from the name, not at random
                    write_atomic(path, partial(figure.savefig, format=fmt, dpi=PNG_DPI, metadata=_NO_TIMESTAMP[fmt]))
                paths.append(path)
    return paths
