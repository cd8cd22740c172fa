"""Time and memory of ``ace-gym view`` on a large run, and how long its page takes to open.

    python benchmarks/bench_view.py [--episodes N] [--browser]

Plays the solver on the 5x5 course domain (35 episodes, seed 0), copies its records to N
episodes (distinct keys; default 10,000) in a temporary run folder, then in a fresh process
writes the page (``ace_gym.eval.view.write_view``) and prints the wall time, the peak resident
memory of that process and the sizes of ``episodes.jsonl`` and the page; then the same without
the grid after each turn (``--no-grids``: no episode replayed). With ``--browser``
(selenium, chromium and chromium-driver installed) it also opens the page in a headless Chromium
and prints the seconds until the episode list shows, until the page has loaded whole, and to
open the last episode.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ace_gym.cli import main as ace_gym
from ace_gym.runs.results import EPISODES_FILE, encode_json, read_records

_WRITE = """
import resource, sys, time
from pathlib import Path
from ace_gym.eval.view import write_view
start = time.perf_counter()
stats = write_view(Path(sys.argv[1]), Path(sys.argv[2]), grids=sys.argv[3] == "grids")
print(stats.episodes, time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--browser", action="store_true", help="also time opening the page in headless Chromium")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        played = Path(folder) / "played"
        ace_gym(["eval", "--policy", "solver", "--dataset", "5x5", "--domains", "course", "--out", str(played)])
        records = list(read_records(played / EPISODES_FILE))
        run = Path(folder) / "large"
        run.mkdir()
        with open(run / EPISODES_FILE, "wb") as handle:
            for index in range(args.episodes):
                record = records[index % len(records)]
                handle.write(encode_json({**record, "key": f"{record['key']}|copy={index}"}) + b"\n")
        row = {"episodes_jsonl_mb": round((run / EPISODES_FILE).stat().st_size / 2**20, 1)}
        for grids in ("grids", "no-grids"):
            page = run / f"view-{grids}.html"
            command = [sys.executable, "-c", _WRITE, str(run), str(page), grids]
            episodes, seconds, peak_kib = subprocess.run(
                command, check=True, capture_output=True, text=True
            ).stdout.split()
            suffix = "" if grids == "grids" else "_no_grids"
            row["episodes"] = int(episodes)
            row[f"page_mb{suffix}"] = round(page.stat().st_size / 2**20, 1)
            row[f"write_s{suffix}"] = round(float(seconds), 2)
            row[f"peak_rss_mb{suffix}"] = round(int(peak_kib) / 1024, 1)
            if grids == "grids" and args.browser:
                row.update(_open_in_browser(page))
            page.unlink()
        print(json.dumps(row))


def _open_in_browser(page: Path) -> dict[str, float]:
    """Seconds from asking for the page until its episode list shows, until it has loaded whole,
    and then to open the last episode."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.browser import headless_chromium  # a benchmark, not a test: no skip expected

    with headless_chromium(page_load_strategy="none") as browser:
        start = time.perf_counter()
        browser.get(page.as_uri())
        while not browser.find_elements("css selector", "tr.episode"):
            time.sleep(0.05)
        listed = time.perf_counter() - start
        while browser.execute_script("return document.readyState") != "complete":
            time.sleep(0.1)
        loaded = time.perf_counter() - start
        browser.find_element("css selector", "th.sortable").click()
        browser.find_element("css selector", "th.sortable").click()  # by # descending: the last episode first
        start = time.perf_counter()
        browser.find_element("css selector", "tr.episode").click()
        browser.find_element("id", "turns")
        opened = time.perf_counter() - start
    return {
        "browser_list_s": round(listed, 2),
        "browser_loaded_s": round(loaded, 2),
        "browser_open_last_s": round(opened, 3),
    }


if __name__ == "__main__":
    main()
