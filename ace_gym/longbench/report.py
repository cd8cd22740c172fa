"""AgentLongBench results: accuracy per setting x question type x bucket, a text table, heatmaps.

A cell's score is the mean official score of its records whose gold parses (records with score
None are counted in ``unscored`` only), as the official evaluator computes accuracy (F1 mean for
verbose Intersection). A setting's overall score and each row/column mean pool the scored records.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from ace_gym.atomic import write_atomic
from ace_gym.errors import ConfigError
from ace_gym.longbench.question_types import QUESTION_TYPES
from ace_gym.runs.results import unique_records
from ace_gym.runs.tokens import BUCKETS
from ace_gym.stats import mean


def is_alb_record(record: Mapping[str, Any]) -> bool:
    """Whether an episode record comes from AgentLongBench (has a question type)."""
    return "question_type" in record


def _bucket_order(bucket: str) -> tuple[int, str]:
    if bucket in BUCKETS:
        return BUCKETS[bucket], bucket
    return (int(bucket), bucket) if bucket.isdigit() else (1 << 62, bucket)


def _stats(records: list[Mapping[str, Any]]) -> dict[str, Any]:
    scores = [float(r["score"]) for r in records if r.get("score") is not None]
    tokens = [float(r["tokens"]) for r in records if r.get("tokens") is not None]
    return {
        "episodes": len(records),
        "scored": len(scores),
        "unscored": len(records) - len(scores),
        "score": mean(scores),
        "tokens": mean(tokens),
    }


def summarize_alb(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """``{"policy", "episodes", "overall", "settings": {setting: {"overall", "per_type",
    "per_bucket", "cells": {question_type: {bucket: stats}}}}}``; stats hold ``episodes``,
    ``scored``, ``unscored``, ``score``, ``tokens`` (mean prompt size). Raises ConfigError for
    records of several policies."""
    records = [r for r in unique_records(records) if is_alb_record(r)]
    policies = sorted({str(r.get("policy")) for r in records})
    if len(policies) > 1:
        raise ConfigError("records", policies, "come from several policies; summarise one policy at a time")
    settings: dict[str, Any] = {}
    for setting in sorted({str(r["domain"]) for r in records}):
        mine = [r for r in records if r["domain"] == setting]
        types = [t for t in QUESTION_TYPES if any(r["question_type"] == t for r in mine)]
        buckets = sorted({str(r["bucket"]) for r in mine}, key=_bucket_order)
        settings[setting] = {
            "overall": _stats(mine),
            "per_type": {t: _stats([r for r in mine if r["question_type"] == t]) for t in types},
            "per_bucket": {b: _stats([r for r in mine if str(r["bucket"]) == b]) for b in buckets},
            "cells": {
                t: {
                    b: _stats(cell)
                    for b in buckets
                    if (cell := [r for r in mine if r["question_type"] == t and str(r["bucket"]) == b])
                }
                for t in types
            },
        }
    return {
        "policy": policies[0] if policies else None,
        "episodes": len(records),
        "overall": _stats(records),
        "settings": settings,
    }


def format_alb_table(summary: Mapping[str, Any]) -> str:
    """One table per setting: rows are question types, columns buckets, cells accuracy (count)."""
    lines = [f"policy: {summary.get('policy')}"]
    for setting, data in summary["settings"].items():
        buckets = list(data["per_bucket"])
        width = max(len(t) for t in data["per_type"]) + 2
        header = f"{setting:<{width}}" + "".join(f"{b:>12}" for b in buckets) + f"{'all':>12}"
        lines += ["", header, "-" * len(header)]
        for question_type, row in data["cells"].items():
            cells = "".join(
                f"{row[b]['score']:>7.3f} ({row[b]['scored']:>2d})" if b in row else f"{'':>12}" for b in buckets
            )
            lines.append(f"{question_type:<{width}}{cells}{data['per_type'][question_type]['score']:>12.3f}")
        lines.append("-" * len(header))
        totals = "".join(f"{data['per_bucket'][b]['score']:>12.3f}" for b in buckets)
        lines.append(f"{'all':<{width}}{totals}{data['overall']['score']:>12.3f}")
    return "\n".join(lines)


def write_alb_heatmaps(
    summary: Mapping[str, Any], out_dir: str | os.PathLike[str], formats: Sequence[str] = ("png",)
) -> list[Path]:
    """Write ``heatmap_<setting>.<format>`` (buckets x question types, accuracy) per setting and
    format (png, pdf, svg) into ``out_dir``; returns the paths. Needs matplotlib (the ``plot`` extra)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    paths = []
    for setting, data in summary["settings"].items():
        buckets = list(data["per_bucket"])
        types = list(data["cells"])
        grid = [[data["cells"][t][b]["score"] if b in data["cells"][t] else None for t in types] for b in buckets]
        values = [[float("nan") if v is None else v for v in row] for row in grid]
        figure = Figure(figsize=(2.0 + 1.1 * len(types), 1.6 + 0.5 * len(buckets)), dpi=100)
        FigureCanvasAgg(figure)
        axes = figure.add_subplot()
        image = axes.imshow(values, vmin=0.0, vmax=1.0, cmap="RdYlGn", aspect="auto")
        axes.set_xticks(range(len(types)), [t.replace("(", "\n(") for t in types], fontsize=7)
        axes.set_yticks(range(len(buckets)), buckets)
        axes.set_xlabel("question type")
        axes.set_ylabel("context length")
        axes.set_title(f"{summary.get('policy')} on {setting}: {data['overall']['score']:.3f}", fontsize=9)
        for r, row in enumerate(grid):
            for c, value in enumerate(row):
                if value is not None:
                    axes.text(c, r, f"{value:.2f}", ha="center", va="center", fontsize=7)
        figure.colorbar(image, ax=axes, label="score")
        figure.tight_layout()
        for fmt in formats:
            path = Path(out_dir) / f"heatmap_{setting}.{fmt}"
            write_atomic(path, partial(figure.savefig, format=fmt))  # a reader never sees half a file
            paths.append(path)
    return paths
