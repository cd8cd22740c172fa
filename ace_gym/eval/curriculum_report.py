"""What a curriculum did, from episode records alone (:func:`ace_gym.eval.records.ace_record`:
``domain``, ``curriculum_level``, ``hidden_slots``, ``decoy_budget``, ``score``): the level
trajectory per domain, success per level, and a plot of the trajectory (the ``plot`` extra).

Records are read in the order given (a collector's finishing order, the order the curriculum
heard the outcomes); records without a ``curriculum_level`` are skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ace_gym.atomic import write_atomic

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PLOT_DPI = 150


def level_trajectory(records: Iterable[Mapping[str, Any]]) -> dict[str, list[int]]:
    """``{domain: [ladder index of each episode, in record order]}``."""
    trajectory: dict[str, list[int]] = {}
    for record in records:
        if record.get("curriculum_level") is not None:
            trajectory.setdefault(str(record["domain"]), []).append(int(record["curriculum_level"]))
    return trajectory


def success_per_level(records: Iterable[Mapping[str, Any]]) -> dict[str, dict[int, dict[str, Any]]]:
    """``{domain: {ladder index: {"hidden_slots", "decoy_budget", "episodes", "successes",
    "success_rate"}}}``, levels in ladder order; an episode succeeds when its score is 1.0."""
    table: dict[str, dict[int, dict[str, Any]]] = {}
    for record in records:
        if record.get("curriculum_level") is None:
            continue
        level = int(record["curriculum_level"])
        row = table.setdefault(str(record["domain"]), {}).setdefault(
            level,
            {
                "hidden_slots": record["hidden_slots"],
                "decoy_budget": record["decoy_budget"],
                "episodes": 0,
                "successes": 0,
            },
        )
        row["episodes"] += 1
        row["successes"] += int(float(record.get("score") or 0.0) >= 1.0)
    for levels in table.values():
        for row in levels.values():
            row["success_rate"] = row["successes"] / row["episodes"]
    return {domain: dict(sorted(levels.items())) for domain, levels in sorted(table.items())}


def trajectory_figure(records: Iterable[Mapping[str, Any]], title: str = "curriculum") -> Figure:
    """The ladder index of every episode, one line per domain, with each level's
    ``(hidden_slots, decoy_budget)`` on the y axis."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    kept = list(records)
    trajectory = level_trajectory(kept)
    labels = {
        level: f"{level}: H={row['hidden_slots']} B={row['decoy_budget']}"
        for levels in success_per_level(kept).values()
        for level, row in levels.items()
    }
    figure = Figure(figsize=(6.4, 3.6), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for domain, levels in trajectory.items():
        axes.step(range(len(levels)), levels, where="post", label=domain)
    axes.set_yticks(sorted(labels), [labels[level] for level in sorted(labels)])
    axes.set_xlabel("episode (in the order the curriculum heard the outcomes)")
    axes.set_ylabel("level")
    axes.set_title(title, fontsize=9)
    if trajectory:
        axes.legend(fontsize=7)
    return figure


def write_trajectory_plot(records: Iterable[Mapping[str, Any]], path: str | Path, title: str = "curriculum") -> Path:
    """Write :func:`trajectory_figure` to ``path`` atomically (format from its suffix, e.g.
    ``.png``); returns the path. Raises ImportError when matplotlib is missing
    (``pip install ".[plot]"``)."""
    path = Path(path)
    figure = trajectory_figure(records, title)
    write_atomic(path, partial(figure.savefig, format=path.suffix.lstrip(".") or "png", dpi=PLOT_DPI))
    return path
