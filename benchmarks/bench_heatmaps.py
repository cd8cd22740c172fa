"""What writing a report's heatmaps costs (docs/benchmarks.md, "Report heatmaps").

Plays ``--policy`` on the bundled ``--dataset`` (every domain, one tool-failure rate: one heatmap
per domain, as ``ace-gym eval`` then ``ace-gym report`` writes them), then times
:func:`ace_gym.eval.plots.write_heatmaps` for each set of formats: the default (PNG) and all
three (PNG, PDF, SVG, what every report wrote before PDF and SVG became opt-in). CPU seconds of
this process, the least of ``--repeats`` runs, after one figure has warmed matplotlib up.

    python benchmarks/bench_heatmaps.py
    python benchmarks/bench_heatmaps.py --policy solver --repeats 5
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from ace_gym.cli import main as cli_main
from ace_gym.eval.plots import DEFAULT_HEATMAP_FORMATS, HEATMAP_FORMATS, heatmap_figure, write_heatmaps
from ace_gym.runs.results import read_records


def cpu_seconds(summary: dict[str, Any], formats: tuple[str, ...], repeats: int) -> tuple[float, int]:
    """The least CPU time of ``repeats`` writes of ``summary``'s heatmaps in ``formats``, and the files written."""
    best, files = float("inf"), 0
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as folder:
            started = time.process_time()
            files = len(write_heatmaps(summary, folder, formats))
            best = min(best, time.process_time() - started)
    return best, files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", default="greedy")
    parser.add_argument("--dataset", default="5x5")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "run"
        cli_main(["eval", "--policy", args.policy, "--dataset", args.dataset, "--out", str(out), "--no-progress"])
        summary = json.loads((out / "summary.json").read_text())
        episodes = sum(1 for _ in read_records(out / "episodes.jsonl"))
    heatmap_figure(summary, next(iter(summary["per_domain"])), next(iter(summary["cells_by_failure_rate"])))
    print(f"\n{args.policy} on {args.dataset}: {episodes} episodes, {len(summary['per_domain'])} domains")
    print(f"{'formats':<16}{'files':>6}{'cpu s':>8}")
    for formats in (DEFAULT_HEATMAP_FORMATS, HEATMAP_FORMATS):
        seconds, files = cpu_seconds(summary, tuple(formats), args.repeats)
        print(f"{' '.join(formats):<16}{files:>6}{seconds:>8.2f}")


if __name__ == "__main__":
    main()
