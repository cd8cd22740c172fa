"""The run viewer's screenshots in docs/img, from real runs made without a network.

    python scripts/view_screenshots.py [--out docs/img]

Plays the solver on the 5x5 course domain at a 0.1 tool-failure rate (``ace-gym eval``) and the
scripted LLM of ``tests/eval/view_runs.py`` (Hermes text with its reasoning, parse errors, a
slot-breaking ``set_slot``, an early ``done``; injected failures, two feedback rounds, a context
window), writes both pages with ``ace-gym view`` and saves, from a headless Chromium
(tests/browser.py): ``view_run.png`` (the solver run: summary, heatmap, episode list),
``view_episode.png`` (an LLM episode turn by turn), ``view_grid_turn.png`` (the grid after the
turn that set a slot breaking its rule) and ``view_grid_final.png`` (the final grid, the truth
marked).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ace_gym.cli import main as ace_gym  # noqa: E402
from tests.browser import headless_chromium  # noqa: E402
from tests.eval.view_runs import llm_run  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        solver = Path(folder) / "solver"
        argv = ["eval", "--policy", "solver", "--dataset", "5x5", "--domains", "course", "--no-progress"]
        assert ace_gym([*argv, "--tool-failure-rates", "0.1", "--out", str(solver)]) == 0
        llm = llm_run(Path(folder) / "llm")
        for run in (solver, llm):
            assert ace_gym(["view", str(run)]) == 0
        with headless_chromium() as browser:
            browser.set_window_size(1280, 1000)
            browser.get((solver / "view.html").as_uri())
            browser.find_element("id", "episodes")
            browser.save_screenshot(str(args.out / "view_run.png"))
            browser.get((llm / "view.html").as_uri())
            browser.find_elements("css selector", "tr.episode")[0].click()
            turns = browser.find_element("id", "turns")
            browser.execute_script("arguments[0].scrollIntoView()", turns)
            browser.save_screenshot(str(args.out / "view_episode.png"))
            broken = next(
                g
                for g in turns.find_elements("css selector", ".turn-grid")
                if g.find_elements("css selector", "td.breaks")
            )
            browser.execute_script("arguments[0].scrollIntoView(); window.scrollBy(0, -420)", broken)
            browser.save_screenshot(str(args.out / "view_grid_turn.png"))
            final = browser.find_element("id", "final-grid")
            browser.execute_script("arguments[0].scrollIntoView(); window.scrollBy(0, -120)", final)
            browser.save_screenshot(str(args.out / "view_grid_final.png"))
    print(f"wrote view_run.png, view_episode.png, view_grid_turn.png, view_grid_final.png to {args.out}")


if __name__ == "__main__":
    main()
