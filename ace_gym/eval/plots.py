"""Per-domain heatmaps of score over hidden slots x decoy budget (needs the ``plot`` extra).

Drawn with matplotlib's object API on an Agg canvas (no pyplot state, no display needed).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ace_gym.eval.summary import score_grid


def matplotlib_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def write_heatmaps(summary: Mapping[str, Any], out_dir: str | Path) -> list[Path]:
    """Write ``heatmap_<domain>.png`` for every domain of ``summary`` into ``out_dir``; returns
    the paths. Raises ImportError when matplotlib is missing (``pip install ace-gym[plot]``)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    out_dir = Path(out_dir)
    paths = []
    for domain in summary["per_domain"]:
        hidden, budgets, grid = score_grid(summary, domain)
        values = [[float("nan") if v is None else v for v in row] for row in grid]
        figure = Figure(figsize=(1.0 + 0.75 * len(budgets), 1.2 + 0.6 * len(hidden)), dpi=100)
        FigureCanvasAgg(figure)
        axes = figure.add_subplot()
        image = axes.imshow(values, vmin=0.0, vmax=1.0, cmap="viridis", origin="lower", aspect="auto")
        axes.set_xticks(range(len(budgets)), [str(b) for b in budgets])
        axes.set_yticks(range(len(hidden)), [str(h) for h in hidden])
        axes.set_xlabel("decoy budget B")
        axes.set_ylabel("hidden slots H")
        score = summary["per_domain"][domain]["score"]
        axes.set_title(f"{summary.get('policy')} on {domain}: score {score:.3f}", fontsize=9)
        for r, row in enumerate(grid):
            for c, value in enumerate(row):
                if value is not None:
                    axes.text(
                        c,
                        r,
                        f"{value:.2f}",
                        ha="center",
                        va="center",
                        fontsize=7,
                        color="black" if value > 0.6 else "white",
                    )
        figure.colorbar(image, ax=axes, label="score")
        figure.tight_layout()
        path = out_dir / f"heatmap_{domain}.png"
        temporary = path.with_name(f".{path.name}.tmp")
        figure.savefig(temporary, format="png")
        os.replace(temporary, path)  # a reader never sees half a PNG
        paths.append(path)
    return paths
