"""``ace-gym view RUN_DIR``: one self-contained HTML page to read a run's episodes.

The page (no network, no CDN; it opens from disk) shows the run (its identity and
``summary.json``: scores by domain, by hidden slots and decoy budget, by failure rate, pass@k where
present), a filterable, sortable, paged episode list and, on a click, one episode turn by turn
(docs/viewer.md). Every env family renders: a field the page has no place for is shown in a
generic tree, and a field that is absent is left out.

Records are streamed from ``episodes.jsonl`` with :func:`~ace_gym.runs.results.read_records`
(its checks and ``--skip-malformed`` rules, as ``replay`` reads them; a key's later duplicates are
left out with a note), one at a time: each becomes one ``<script type="application/json">`` block
that the page parses only when that episode is opened, so memory stays bounded by one record plus
a short row per episode. The episodes come last on the page, after the list and the code, so the
list shows while a large page is still loading (10,000 episodes: seconds). Every text is embedded as JSON with
``<``, ``>``, ``&`` and U+2028/U+2029 escaped (:func:`script_json`) and rendered by the page
through ``textContent``, never as markup. A string longer than :data:`MAX_TEXT_CHARS` is clipped,
saying how much was left out.
"""

from __future__ import annotations

import argparse
import html
import json
import math
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import IO, Any

from ace_gym.atomic import read_regular_file, write_atomic
from ace_gym.errors import ConfigError
from ace_gym.eval.recovery import failure_log
from ace_gym.eval.view_grids import TurnGrids
from ace_gym.runs.results import EPISODES_FILE, MAX_SUMMARY_BYTES, SUMMARY_FILE, duplicates_note, read_records

MAX_TEXT_CHARS = 200_000
"""The longest string embedded whole; a longer one keeps its head and says how many characters were left out."""
VIEW_FILE = "view.html"
_ASSETS = resources.files("ace_gym.eval") / "view_assets"


@dataclass
class ViewStats:
    """What :func:`write_view` wrote: ``episodes`` embedded, malformed ``skipped`` line numbers,
    ``duplicates`` line numbers left out, and the output ``path``."""

    path: Path
    episodes: int = 0
    skipped: list[int] = field(default_factory=list)
    duplicates: list[int] = field(default_factory=list)


def script_json(value: Any) -> str:
    """``value`` as JSON text safe inside a ``<script type="application/json">`` element: ASCII
    only (so U+2028/U+2029 and lone surrogates are ``\\u`` escapes) with ``<``, ``>`` and ``&``
    escaped, so no text in it can close the element or start markup."""
    text = json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def embedded(value: Any) -> str:
    """:func:`script_json` of :func:`displayable` ``value``; a value whose JSON text is shorter
    than :data:`MAX_TEXT_CHARS` and holds no NaN or infinity is already displayable, and is not
    walked (the common case: it costs one ``json.dumps``)."""
    try:
        text = script_json(value)
    except ValueError:  # a NaN or an infinity
        return script_json(displayable(value))
    return text if len(text) <= MAX_TEXT_CHARS else script_json(displayable(value))


def displayable(value: Any, limit: int = MAX_TEXT_CHARS) -> Any:
    """``value`` as the page embeds it: every string (and mapping key) longer than ``limit``
    characters cut to ``limit`` with a note of how many were left out, and a NaN or infinity
    (which Python's JSON reader accepts and JSON has not) as its text."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, str):
        return value if len(value) <= limit else f"{value[:limit]}… [{len(value) - limit} more characters not shown]"
    if isinstance(value, Mapping):
        return {displayable(str(k), limit): displayable(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [displayable(item, limit) for item in value]
    return value


def episode_row(record: Mapping[str, Any], index: int) -> dict[str, Any]:
    """The episode list's row of ``record``: what the list shows, filters and sorts by (a field the
    record lacks is None)."""
    turns = [turn for turn in _list(record.get("turns")) if isinstance(turn, Mapping)]
    infos = [turn["info"] for turn in turns if isinstance(turn.get("info"), Mapping)]
    calls = [call for info in infos for call in _list(info.get("calls")) if isinstance(call, Mapping)]
    failures = failure_log(turns) if calls else []
    rounds = record.get("feedback_rounds")
    usage = record.get("usage") if isinstance(record.get("usage"), Mapping) else {}
    return {
        "i": index,
        "key": record["key"],
        "domain": record["domain"],
        "instance": _text(record.get("instance_id") or record.get("question_type")),
        "H": record.get("hidden_slots"),
        "B": record.get("decoy_budget"),
        "rate": record.get("tool_failure_rate"),
        "score": record.get("score"),
        "turns": len(turns) if turns else usage.get("turns"),
        "parse_errors": sum(len(_list(info.get("parse_errors"))) for info in infos),
        "invalid_calls": sum(1 for call in calls if call.get("ok") is False and not call.get("failure_injected")),
        "injected": len(failures),
        "recovered": sum(1 for failure in failures if failure["recovered"]),
        "attempts": _attempts(rounds),
    }


def write_view(
    run_dir: Path, out: Path | None = None, *, skip_malformed: bool = False, grids: bool = True
) -> ViewStats:
    """Write the page of the run in ``run_dir`` to ``out`` (default ``run_dir/view.html``),
    atomically, with the grid after each turn of every ACE episode unless ``grids`` is False
    (:class:`~ace_gym.eval.view_grids.TurnGrids`: each record replayed). ConfigError when
    ``run_dir`` holds no episode file; MalformedRecordsError (nothing written) for malformed lines
    unless ``skip_malformed``."""
    episodes = run_dir / EPISODES_FILE
    if not episodes.is_file():
        raise ConfigError("run_dir", str(run_dir), f"holds no {EPISODES_FILE}")
    stats = ViewStats(path=out or run_dir / VIEW_FILE)
    summary, summary_note = _summary(run_dir / SUMMARY_FILE)

    def write(handle: IO[bytes]) -> None:
        rows: list[dict[str, Any]] = []
        tool_sets: dict[str, int] = {}
        skipped = stats.skipped if skip_malformed else None
        # the episodes go last on the page
        with tempfile.TemporaryFile(dir=stats.path.parent) as bodies, TurnGrids() as turn_grids:
            for index, record in enumerate(read_records(episodes, skipped=skipped, duplicates=stats.duplicates)):
                rows.append(displayable(episode_row(record, index)))
                replayed = turn_grids.of(record) if grids else None
                if replayed is not None:  # before its episode: an episode that has loaded has its grids
                    bodies.write(
                        f'<script type="application/json" id="grids-{index}">{embedded(replayed)}</script>\n'.encode(
                            "ascii"
                        )
                    )
                body = dict(record)
                if "tools" in body:  # one copy per distinct tool list, not one per episode
                    body["tools"] = tool_sets.setdefault(embedded(body["tools"]), len(tool_sets))
                bodies.write(
                    f'<script type="application/json" id="ep-{index}">{embedded(body)}</script>\n'.encode("ascii")
                )
            stats.episodes = len(rows)
            notes = [summary_note] if summary_note else []
            if stats.skipped:
                notes.append(f"left out malformed line(s) {', '.join(map(str, stats.skipped[:20]))} of {EPISODES_FILE}")
            if stats.duplicates:
                notes.append(duplicates_note(episodes, stats.duplicates))
            run = {"dir": str(run_dir), "summary": displayable(summary), "notes": notes}
            script = (_ASSETS / "view.js").read_text(encoding="utf-8")
            handle.write(
                (
                    f"{_page_head(run_dir.name)}"
                    f'<script type="application/json" id="run">{script_json(run)}</script>\n'
                    f'<script type="application/json" id="rows">{script_json(rows)}</script>\n'
                    f'<script type="application/json" id="tools">[{",".join(tool_sets)}]</script>\n'
                    f"<script>{script}</script>\n"
                ).encode("ascii", "xmlcharrefreplace")
            )
            bodies.seek(0)
            shutil.copyfileobj(bodies, handle, 2**20)
        handle.write(b"</body>\n</html>\n")

    write_atomic(stats.path, write)
    return stats


def _summary(path: Path) -> tuple[Any, str | None]:
    """The run's summary (None when there is none or it cannot be read) and a note why not."""
    if not path.exists():
        return None, None
    try:
        return json.loads(read_regular_file(path, MAX_SUMMARY_BYTES)), None
    except (OSError, ValueError, RecursionError) as error:
        return None, f"{path.name} was not shown: {error}"


def _page_head(title: str) -> str:
    css = (_ASSETS / "view.css").read_text(encoding="utf-8")
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n"
        f"<title>ace-gym run {html.escape(title)}</title>\n<style>{css}</style>\n</head>\n<body>\n"
        '<header><h1>ace-gym run</h1><p id="run-dir"></p></header>\n'
        '<main><section id="run-view"></section><section id="list-view"></section>'
        '<section id="episode-view" hidden></section></main>\n'
    )


def _attempts(rounds: Any) -> int | None:
    """How many feedback-round attempts an episode used (None without feedback rounds)."""
    if not isinstance(rounds, Mapping):
        return None
    used = rounds.get("attempts_used")
    return used if type(used) is int else len(_list(rounds.get("scores")))


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def register(subparsers: Any) -> None:
    view = subparsers.add_parser(
        "view",
        help="write one self-contained HTML page to read a run's episodes",
        description="Writes RUN_DIR/view.html (or --out): the run's settings and summary, a filterable, sortable "
        "episode list and every episode turn by turn (docs/viewer.md). Opens from disk; needs no network. "
        "Exit 5: malformed lines in episodes.jsonl (--skip-malformed leaves them out).",
    )
    view.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="output directory of an eval or rollout run")
    view.add_argument(
        "--out", type=Path, default=None, metavar="FILE", help="page to write (default RUN_DIR/view.html)"
    )
    view.add_argument(
        "--skip-malformed", action="store_true", help="leave out malformed lines of episodes.jsonl instead of stopping"
    )
    view.add_argument(
        "--no-grids",
        dest="grids",
        action="store_false",
        help="leave out the grid after each turn (rebuilt by replaying each episode: milliseconds an episode)",
    )
    view.set_defaults(handler=run_view, write_hint="pass --out with a path you can write")


def run_view(args: argparse.Namespace) -> int:
    stats = write_view(args.run_dir, args.out, skip_malformed=args.skip_malformed, grids=args.grids)
    if stats.duplicates:
        print(f"note: {duplicates_note(args.run_dir / EPISODES_FILE, stats.duplicates)}", file=sys.stderr)
    print(f"wrote {stats.path} ({stats.episodes} episodes)")
    return 0
