"""ace-gym side by side with the published ACE-Bench release, measured in one run.

    python benchmarks/bench_reference.py --reference PATH [--quick] [--full]
    python benchmarks/bench_reference.py [--quick]            # ace-gym's side alone

``PATH`` is a checkout of the published ACE-Bench release (the folder holding ``env/`` and
``data_generation/``); its code is imported from there at run time, next to ace-gym, in this
process (its dependencies — pydantic, docstring_parser, loguru, rich — must import here). The
release reads plain ``.json`` files, so the bundled ``.json.gz`` files (byte-identical to the
release's data once decompressed) are decompressed into a temporary folder that both sides load.

Every row times the release and ace-gym on the same work, interleaved, best of R runs (a shared
machine only ever adds time), and prints ``release / ace-gym`` (higher is better for ace-gym):

* whole episode: setup + the recorded calls of the 24 parity traces + the final score;
* trace mix: the same calls, per call, through the release's ``call_saved_dataset_tool`` +
  ``json.dumps`` (the text the model sees) and ace-gym's raw dispatcher / ``env.step``.
  ace-gym builds every reply afresh, but keeps per instance what its tools build from the
  instance alone (a query's candidate values, the query budgets). So each of these rows comes
  twice: "first on its instance", every timed run of ours after its instances' stores were
  emptied (untimed), and "replayed", the run right after it on the stores the identical first
  run filled (what the members of a GRPO group get). The release's side is the same run for both;
* final score on a filled grid at H=1 and H=15 (``Task.eval`` vs what ``env.score`` runs), and
  ``done`` through ``env.step`` (the call plus the score);
* cold paths: the first query on a (slot, field) and the first ``get_current_grid_state`` of
  an instance (ace-gym's per-instance store emptied before each call); and, for each tool
  kind the traces use, its first call on a new instance (the first recorded call of that kind per
  domain, as the first call of a new episode on the instance compiled anew from a dataset read
  anew from the validated-dataset cache, so that nothing an earlier call built on it is there;
  the release's on a new ``Task``; both set up untimed before every timed call);
* loading one file / all six, and loading + setting up every instance of one file, each the first
  time (full validation, validated-dataset cache entry written) and for a file validated before;
  both hash the file (the in-process SHA-256 memo emptied in every timed call), as a new process;
* fresh processes (median of N after a warm-up run, bytecode, numba kernels and validated datasets
  cached): import, import + load + replay all 24 traces (again with an empty dataset cache), and
  the generator (with and without its numba search);
* the generator in process (5x5 H15 B19 by default, 5x7 H21 B25 with ``--full``: the release
  takes tens of seconds there).

Without ``--reference`` only ace-gym's column is printed. Targets are those of issue 10; the rows marked "floor" carry issue 41's floors.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import gzip
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_tools import DEFAULT_TRACES, _best_us, _filled_state, _load_traces, _trace_calls, _trace_config

from ace_gym.domains import DOMAIN_NAMES, get_domain
from ace_gym.envs import AceEnv, forget_stored_replies
from ace_gym.instance import (
    bundled_dataset_path,
    forget_loaded_datasets,
    read_dataset,
    resolve_dataset,
)
from ace_gym.tools import EpisodeState, ToolConfig, tool_names, toolset
from ace_gym.tools.replies import InstanceTexts

Timed = Callable[[], object]


class Release:
    """The published release's loader, task, tool handler, scorer and generator, imported from ``root``."""

    def __init__(self, root: Path, data_dir: Path) -> None:
        sys.path.insert(0, str(root))
        from data_generation.generate import generate_dataset  # type: ignore[import-not-found]
        from env.agent.task import Task  # type: ignore[import-not-found]
        from env.load_datasets.loader import load_dataset_objects_from_file  # type: ignore[import-not-found]
        from env.tools import call_saved_dataset_tool  # type: ignore[import-not-found]

        self.root = root
        self.Task = Task
        self.call = call_saved_dataset_tool
        self.load = load_dataset_objects_from_file
        self.generate_dataset = generate_dataset
        self.files = {domain: str(data_dir / f"{domain}.json") for domain in DOMAIN_NAMES}
        self.objects = {domain: self.load(path) for domain, path in self.files.items()}

    def task(self, domain: str, index: int, config: dict[str, Any]) -> Any:
        return self.Task(self.objects[domain][index], **config)

    def filled_task(self, domain: str, index: int) -> Any:
        task = self.task(domain, index, {"extra_query_num": -1, "global_check_alpha": -1})
        task.agent_solution = copy.deepcopy(task.dataset_object.truth_solution)
        return task

    def reply(self, task: Any, name: str, arguments: Any) -> str:
        """The text the model sees; a call the release raises on (its agent catches and reports
        the exception) costs the raise."""
        try:
            return json.dumps(self.call(task, name, arguments), ensure_ascii=False)
        except Exception as error:  # the release raises TypeError, ValueError, ...
            return str(error)

    def episode(self, domain: str, index: int, config: dict[str, Any], calls: list[tuple[str, Any]]) -> object:
        """Set up (the task, its first messages and tool schemas, as ``env.reset`` returns them),
        play ``calls``, score."""
        task = self.task(domain, index, config)
        task.build_initial_messages()
        task.get_tool_schemas()
        for name, arguments in calls:
            self.reply(task, name, arguments)
        return task.eval()


def _decompress_bundled(folder: Path) -> dict[str, Path]:
    paths = {}
    for domain in DOMAIN_NAMES:
        paths[domain] = folder / f"{domain}.json"
        paths[domain].write_bytes(gzip.decompress(bundled_dataset_path("5x5", domain).read_bytes()))
    return paths


FIRST = "first on its instance (per-instance store empty)"
REPLAYED = "replayed (per-instance store filled by an earlier identical episode, as GRPO group members get)"
LABEL_WIDTH = len(f"trace mix, raw dispatcher (9999 calls), {REPLAYED}")


class Table:
    """Rows of (what, release, ace-gym, unit, target) printed with the ratio release / ace-gym."""

    def __init__(self, with_release: bool) -> None:
        self.with_release = with_release
        self.rows: list[tuple[str, float | None, float, str, str]] = []

    def add(self, what: str, release: float | None, ours: float, unit: str, target: str = "") -> None:
        self.rows.append((what, release, ours, unit, target))
        self._print(self.rows[-1])
        sys.stdout.flush()

    def add_mean(self, what: str, pairs: list[tuple[float, float]], unit: str, target: str) -> None:
        """A row of the means of (release, ace-gym) ``pairs`` (the release's unused without it)."""
        release = statistics.fmean(p[0] for p in pairs) if self.with_release else None
        self.add(what, release, statistics.fmean(p[1] for p in pairs), unit, target)

    def header(self) -> None:
        if self.with_release:
            print(f"{'measure':{LABEL_WIDTH}s} {'release':>10s} {'ace-gym':>10s} {'unit':5s} {'ratio':>7s}  target")
        else:
            print(f"{'measure':{LABEL_WIDTH}s} {'ace-gym':>10s} {'unit':5s}")

    def _print(self, row: tuple[str, float | None, float, str, str]) -> None:
        what, release, ours, unit, target = row
        if not self.with_release:
            print(f"{what:{LABEL_WIDTH}s} {ours:10.2f} {unit:5s}")
        elif release is None:
            print(f"{what:{LABEL_WIDTH}s} {'-':>10s} {ours:10.2f} {unit:5s} {'':>7s}  {target}")
        else:
            print(f"{what:{LABEL_WIDTH}s} {release:10.2f} {ours:10.2f} {unit:5s} {release / ours:6.2f}x  {target}")


def _pair(release_fn: Timed | None, ours_fn: Timed, number: int, runs: int) -> tuple[float | None, float]:
    """µs per call of both (interleaved, best of ``runs``); the release's None without a reference."""
    if release_fn is None:
        return None, _best_us([ours_fn], number, runs)[0]
    release_us, ours_us = _best_us([release_fn, ours_fn], number, runs)
    return release_us, ours_us


def _best_after(timed: list[tuple[Timed | None, Timed]], runs: int) -> list[float]:
    """µs of one call of each ``(set_up, function)``: best of ``runs``, interleaved in the order
    given; each ``set_up`` (if any) runs untimed just before its function."""
    best = [float("inf")] * len(timed)
    for _ in range(runs):
        for k, (set_up, function) in enumerate(timed):
            if set_up is not None:
                set_up()
            start = time.perf_counter()
            function()
            best[k] = min(best[k], (time.perf_counter() - start) * 1e6)
    return best


def bench_episodes(table: Table, release: Release | None, traces: list[dict[str, Any]], runs: int) -> None:
    """The recorded episodes, each of ours twice per run: first on its instance (the per-instance
    stores emptied before, untimed: :func:`ace_gym.envs.forget_stored_replies`) and replayed right after (every
    reply of the identical episode stored). The release recomputes every call; its side is timed
    once per run."""
    prepared = []
    for trace in traces:
        config = _trace_config(trace)
        env = AceEnv(trace["domain"], **config)
        dataset = resolve_dataset("5x5", trace["domain"])
        compiled = dataset.compiled(trace["instance_index"])
        prepared.append((trace, config, env, compiled, _trace_calls(trace)))
    total_calls = sum(len(calls) for *_, calls in prepared)
    instances = [compiled for _, _, _, compiled, _ in prepared]

    def forget() -> None:
        forget_stored_replies(instances)

    def ours_episodes() -> None:
        for trace, _, env, _, calls in prepared:
            env.reset(options={"instance_index": trace["instance_index"]})
            step = env.step
            terminated = truncated = False
            for name, arguments in calls:
                _, _, terminated, truncated, _ = step({"name": name, "arguments": arguments})
            if not (terminated or truncated):
                env.score()

    release_episodes = None
    if release is not None:

        def release_episodes() -> None:
            for trace, config, _, _, calls in prepared:
                release.episode(trace["domain"], trace["instance_index"], config, calls)

    timed = [(forget, ours_episodes), (None, ours_episodes)]
    timings = _best_after(([(None, release_episodes)] if release_episodes else []) + timed, runs)
    per = len(prepared) * 1e3
    rel = timings[0] / per if release_episodes else None
    for when, ours, floor in zip((FIRST, REPLAYED), timings[-2:], (">= 10x floor", ""), strict=True):
        table.add(f"whole episode ({len(prepared)} traces, mean), {when}", rel, ours / per, "ms", floor)

    states = [
        (toolset(get_domain(t["domain"])), compiled, ToolConfig(**config), calls)
        for t, config, _, compiled, calls in prepared
    ]

    def ours_raw() -> None:
        for tools, compiled, config, calls in states:
            state = EpisodeState(compiled, config)
            call = tools.call
            for name, arguments in calls:
                call(state, name, arguments)

    def ours_step() -> None:
        for trace, _, env, _, calls in prepared:
            env.reset(options={"instance_index": trace["instance_index"]})
            step = env.step
            for name, arguments in calls:
                step({"name": name, "arguments": arguments})

    release_mix = None
    if release is not None:

        def release_mix() -> None:
            for trace, config, _, _, calls in prepared:
                task = release.task(trace["domain"], trace["instance_index"], config)
                for name, arguments in calls:
                    release.reply(task, name, arguments)

    timed = [(forget, ours_raw), (None, ours_raw), (forget, ours_step), (None, ours_step)]
    timings = _best_after(([(None, release_mix)] if release_mix else []) + timed, runs)
    rel_mix = timings[0] / total_calls if release_mix else None
    raw_first, raw_replayed, step_first, step_replayed = (t / total_calls for t in timings[-4:])
    for what, first, replayed, floor in (
        (f"trace mix, raw dispatcher ({total_calls} calls)", raw_first, raw_replayed, ""),
        ("trace mix, through env.step", step_first, step_replayed, ">= 1x floor"),
    ):
        table.add(f"{what}, {FIRST}", rel_mix, first, "µs", floor)
        table.add(f"{what}, {REPLAYED}", rel_mix, replayed, "µs", floor)


def _score_pair(release: Release | None, domain: str, index: int, number: int, runs: int) -> tuple[float, float]:
    """µs of the final score of a filled grid: the release's ``Task.eval``, what ``env.score`` runs."""
    state = _filled_state(resolve_dataset("5x5", domain).compiled(index))

    rel, our = _pair(release.filled_task(domain, index).eval if release else None, state.final_violation, number, runs)
    return rel or 0.0, our


def bench_score(table: Table, release: Release | None, number: int, runs: int) -> None:
    for label, index in (("H=1", 0), ("H=15", 34)):
        pairs = [_score_pair(release, domain, index, number, runs) for domain in DOMAIN_NAMES]
        table.add_mean(f"final score on a filled grid, {label} (mean of 6 domains)", pairs, "µs", ">= 10x")

    compiled = resolve_dataset("5x5", "course").compiled(34)
    env = AceEnv("course")
    env.reset(options={"instance_index": 34})
    for s, slot in enumerate(compiled.slots):
        env.state.place(s, int(compiled.truth[slot.cell]))
    done = {"name": "done", "arguments": {}}

    def ours_done() -> object:
        env._reopen()
        return env.step(done)

    release_done = None
    if release is not None:
        task = release.filled_task("course", 34)

        def release_done() -> object:
            release.reply(task, "done", {})
            return task.eval()

    rel, our = _pair(release_done, ours_done, number, runs)
    table.add("done through env.step (call + final score, H=15)", rel, our, "µs", "")


def _cold_pairs(release: Release | None, domain: str, number: int, runs: int) -> list[float]:
    """µs of [release, ours] first query on a (slot, field), then [release, ours] cold grid state."""
    compiled = resolve_dataset("5x5", domain).compiled(34)
    tools = toolset(get_domain(domain))
    names = tool_names(domain)
    slot = compiled.slots[0]
    field = get_domain(domain).numeric_attributes[0]
    query = {"row": slot.row, "col": slot.col, "field": field, "operator": ">=", "value": 0}
    state = EpisodeState(compiled, ToolConfig())

    def ours_first_query() -> object:
        state.texts.query_matches.clear()  # nothing of this query kept: its column, its payload
        return tools.call(state, names["query"], query)

    def ours_cold_grid() -> object:
        state.texts = InstanceTexts(compiled)
        return tools.call(state, names["grid_state"], {})

    release_query = release_grid = None
    if release is not None:
        task = release.task(domain, 34, {"extra_query_num": -1, "global_check_alpha": -1})

        def release_query() -> object:
            return release.reply(task, names["query"], query)

        def release_grid() -> object:
            return release.reply(task, names["grid_state"], {})

    rel_query, ours_query = _pair(release_query, ours_first_query, number, runs)
    rel_grid, ours_grid = _pair(release_grid, ours_cold_grid, number, runs)
    return [rel_query or 0.0, ours_query, rel_grid or 0.0, ours_grid]


def bench_cold(table: Table, release: Release | None, number: int, runs: int) -> None:
    means = [
        statistics.fmean(column)
        for column in zip(*(_cold_pairs(release, d, number, runs) for d in DOMAIN_NAMES), strict=True)
    ]
    for what, (rel, ours) in (
        ("first query on a (slot, field), H=15 (mean of 6)", means[:2]),
        ("cold get_current_grid_state, H=15 (mean of 6)", means[2:]),
    ):
        table.add(what, rel if release else None, ours, "µs", ">= 1x floor")


_SUCCESS = '{"status": "success"'


def _first_calls(traces: list[dict[str, Any]]) -> dict[str, list[tuple[dict[str, Any], str, Any]]]:
    """By tool kind (:func:`tool_names`' keys), per domain: the trace and arguments of the first
    call of that kind the traces record, the first one the release answered with success when
    there is one (a refusal of a bad argument stops before the tool's work)."""
    found: dict[tuple[str, str], tuple[dict[str, Any], str, Any]] = {}
    for succeeded in (True, False):
        for trace in traces:
            kinds = {name: kind for kind, name in tool_names(trace["domain"]).items()}
            for call in trace["calls"]:
                kind = kinds.get(call["tool"])
                if kind is None or call["content"].startswith(_SUCCESS) is not succeeded:
                    continue
                found.setdefault((kind, trace["domain"]), (trace, call["tool"], call["args"]))
    by_kind: dict[str, list[tuple[dict[str, Any], str, Any]]] = {}
    for (kind, _), first in found.items():
        by_kind.setdefault(kind, []).append(first)
    return by_kind


def _first_call_pair(
    release: Release | None, trace: dict[str, Any], config: dict[str, Any], name: str, arguments: Any, samples: int
) -> tuple[float, float]:
    """µs of ``name(arguments)`` as the first call on a new episode of the trace's instance:
    the release's (0.0 without it) on a new ``Task``, ours on the instance compiled anew from a
    dataset read anew from the validated-dataset cache (so nothing built on an instance before,
    stored replies or a lazily built table, is there)."""
    domain, index = trace["domain"], trace["instance_index"]
    path = bundled_dataset_path("5x5", domain)
    call, tool_config = toolset(get_domain(domain)).call, ToolConfig(**config)
    episode: dict[str, Any] = {}

    def ours_new_episode() -> None:
        episode["ours"] = EpisodeState(read_dataset(path).compiled(index), tool_config)

    def ours_first() -> object:
        return call(episode["ours"], name, arguments)

    timed: list[tuple[Timed | None, Timed]] = [(ours_new_episode, ours_first)]
    if release is not None:

        def release_new_episode() -> None:
            episode["release"] = release.task(domain, index, config)

        def release_first() -> object:
            return release.reply(episode["release"], name, arguments)

        timed.insert(0, (release_new_episode, release_first))
    timings = _best_after(timed, samples)
    return (timings[0] if release is not None else 0.0), timings[-1]


def bench_cold_tools(table: Table, release: Release | None, traces: list[dict[str, Any]], samples: int) -> None:
    """Each tool kind the traces use, its first call on an instance: the recorded arguments on
    the trace's instance (budgets unlimited), as the first call of a new episode. Before every
    timed call, untimed, ours gets a new episode state on a new instance (the dataset read again
    from the validated-dataset cache, the instance compiled from it: what a new process gets),
    and the release a new ``Task``; then one call of each is timed, interleaved, best of
    ``samples``. Mean over the domains."""
    unlimited = {"extra_query_num": -1, "global_check_alpha": -1}
    for kind, firsts in sorted(_first_calls(traces).items()):
        pairs = [
            _first_call_pair(release, trace, {**_trace_config(trace), **unlimited}, name, arguments, samples)
            for trace, name, arguments in firsts
        ]
        tool = tool_names("course")[kind].replace("course", "<domain>")
        table.add_mean(
            f"first {tool} on a new instance from the cache (mean of {len(pairs)} domains)", pairs, "µs", ">= 1x floor"
        )


def bench_load(table: Table, release: Release | None, files: dict[str, Path], runs: int, scratch: Path) -> None:
    """Loading, each of ours twice: the first time a machine sees a file (full validation, then
    the validated-dataset cache entry written into an empty cache folder) and a file this machine
    validated before (its entry read). Every timed call of ours first forgets what the process
    loaded and hashed (:func:`ace_gym.instance.forget_loaded_datasets`), so that it hashes each
    file as a new process must to find its cache entry. The release's loader has no cache and
    validates nothing."""

    def first_time(load: Timed) -> Timed:
        def run() -> object:
            os.environ["ACE_GYM_CACHE_DIR"] = tempfile.mkdtemp(dir=scratch)
            return load()

        return run

    def ours_load(domains: tuple[str, ...]) -> Timed:
        def run() -> object:
            forget_loaded_datasets()  # a new process hashes the file
            return [read_dataset(files[d]) for d in domains]

        return run

    def ours_load_setup() -> None:
        forget_loaded_datasets()
        dataset = read_dataset(files["course"])
        config = ToolConfig()
        for index in range(len(dataset)):
            EpisodeState(dataset.compiled(index), config)

    def release_load(domains: tuple[str, ...]) -> Timed:
        return lambda: [release.load(release.files[d]) for d in domains]

    def release_load_setup() -> None:
        for obj in release.load(release.files["course"]):
            release.Task(obj)

    warm = str(scratch / "warm")
    cases = [
        (f"load {label}", release_load(domains), ours_load(domains))
        for label, domains in (
            ("one 5x5 file", ("course",)),
            ("all six 5x5 files", DOMAIN_NAMES),
        )
    ]
    cases.append(("load one file + set up every instance", release_load_setup, ours_load_setup))
    for what, release_fn, ours_fn in cases:
        rel, our = _pair(release_fn if release else None, first_time(ours_fn), 1, runs)
        table.add(f"{what}, first use (validates)", _ms(rel), our / 1e3, "ms", ">= 2x")
        os.environ["ACE_GYM_CACHE_DIR"] = warm
        ours_fn()  # the entries written: the files are now validated before
        rel, our = _pair(release_fn if release else None, ours_fn, 1, runs)
        table.add(f"{what}, validated before (cache)", _ms(rel), our / 1e3, "ms", ">= 2x")


def _ms(us: float | None) -> float | None:
    return None if us is None else us / 1e3


_OURS_IMPORT = "import ace_gym"
_RELEASE_IMPORT = (
    "from env.tools import call_saved_dataset_tool; from env.load_datasets.loader import load_dataset_objects_from_file"
)
_TIMED_SCRIPT = """
import sys, time
began = time.perf_counter()
{body}
print(time.perf_counter() - began)
print("numba" in sys.modules)
"""
_OURS_REPLAY = """
import gzip, json
from ace_gym.envs import AceEnv
traces = [json.loads(line) for line in gzip.open({traces!r}, "rt")]
keys = ("extra_query_num", "global_check_alpha", "check_include_reason", "max_query_ids", "max_query_fields")
for trace in traces:
    env = AceEnv(trace["domain"], **{{k: trace["task_config"][k] for k in keys}})
    env.reset(options={{"instance_index": trace["instance_index"]}})
    ended = False
    for call in trace["calls"]:
        if call["content"] != '{failed}':
            _, _, terminated, truncated, _ = env.step({{"name": call["tool"], "arguments": call["args"]}})
            ended = terminated or truncated
    if not ended:
        env.score()
"""
_RELEASE_REPLAY = """
import gzip, json
from env.load_datasets.loader import load_dataset_objects_from_file
from env.agent.task import Task
from env.tools import call_saved_dataset_tool
traces = [json.loads(line) for line in gzip.open({traces!r}, "rt")]
files = {files!r}
objects = {{}}
keys = ("extra_query_num", "global_check_alpha", "check_include_reason", "max_query_ids", "max_query_fields")
for trace in traces:
    domain = trace["domain"]
    if domain not in objects:
        objects[domain] = load_dataset_objects_from_file(files[domain])
    task = Task(objects[domain][trace["instance_index"]], **{{k: trace["task_config"][k] for k in keys}})
    for call in trace["calls"]:
        if call["content"] != '{failed}':
            try:
                json.dumps(call_saved_dataset_tool(task, call["tool"], call["args"]), ensure_ascii=False)
            except Exception as error:
                str(error)
    task.eval()
"""
_OURS_GENERATE = (
    "from ace_gym.generators import generate_instance\n"
    "generate_instance('course', rows=5, cols=5, hidden_slots=5, decoy_budget=4, seed=42)"
)
_OURS_GENERATE_AND_SEARCH = (
    _OURS_GENERATE + "\nimport numpy as np\n"
    "from ace_gym.generators.combinations import every_combination_violates\n"
    "every_combination_violates(np.array([1]), np.array([0]), [np.array([[-1]])])"
)
_RELEASE_GENERATE = (
    "import contextlib, io, tempfile\n"
    "from data_generation.generate import generate_dataset\n"
    "with contextlib.redirect_stdout(io.StringIO()):\n"
    "    generate_dataset('course', rows=5, cols=5, hidden_slots=[5], branch_budget=[4], seed=42,"
    " output_dir=tempfile.mkdtemp())"
)


def _process_seconds(body: str, cwd: Path | None, inner: bool, environment: dict[str, str]) -> tuple[float, bool]:
    """One fresh interpreter running ``body``: the timed body's seconds (``inner``) or the
    process's wall time; and whether numba was imported."""
    began = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", _TIMED_SCRIPT.format(body=body)],
        capture_output=True,
        text=True,
        check=True,
        cwd=cwd,
        env=environment,
    )
    wall = time.perf_counter() - began
    inner_s, numba_text = out.stdout.split()[-2:]
    return float(inner_s) if inner else wall, numba_text == "True"


def bench_processes(
    table: Table, release: Release | None, files: dict[str, Path], traces: Path, runs: int, scratch: Path
) -> None:
    """Fresh processes, median of ``runs`` after a warm-up: import, replay, generate."""
    from ace_gym.tools import TOOL_CALL_FAILED

    replay = (
        _OURS_REPLAY.format(traces=str(traces), failed=TOOL_CALL_FAILED),
        _RELEASE_REPLAY.format(
            traces=str(traces), failed=TOOL_CALL_FAILED, files={d: str(p) for d, p in files.items()}
        ),
    )
    # (what, our body, the release's body, time the body only, target, empty dataset cache every run)
    cases = [
        ("import (in the process, -c 'import ...')", _OURS_IMPORT, _RELEASE_IMPORT, True, ">= 0.8x floor", False),
        ("process: import + load + replay all 24 traces", *replay, False, ">= 0.8x floor", False),
        ("process: the same, dataset cache empty (validates 6 files)", *replay, False, "", True),
        (
            "process: generate one 5x5 H5 B4 instance, caches warm",
            _OURS_GENERATE,
            _RELEASE_GENERATE,
            False,
            "< 0.5 s",
            False,
        ),
        # ace-gym alone: what a generator process pays once its exact search (numba) first runs
        (
            "process: the same + one exact search, numba cache warm",
            _OURS_GENERATE_AND_SEARCH,
            None,
            False,
            "< 0.5 s",
            False,
        ),
    ]
    # Bytecode, numba's compiled kernels and validated datasets are cached (in private folders, so
    # that neither source tree nor the user's cache is written to) and a first, untimed run of each
    # body fills them, as an installed package's are filled by its first use.
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    environment["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
    environment["NUMBA_CACHE_DIR"] = str(scratch / "pycache" / "numba")
    warm_cache = tempfile.mkdtemp(dir=scratch)
    for what, ours_body, release_body, inner, target, empty_cache in cases:
        samples_ours, samples_release = [], []
        for run in range(runs + 1):  # interleaved fresh processes
            environment["ACE_GYM_CACHE_DIR"] = tempfile.mkdtemp(dir=scratch) if empty_cache else warm_cache
            seconds, numba = _process_seconds(ours_body, None, inner, environment)
            samples_ours.append(seconds)
            if release is not None and release_body is not None:
                samples_release.append(_process_seconds(release_body, release.root, inner, environment)[0])
            if run == 0:
                samples_ours.clear()
                samples_release.clear()
        ours_s = statistics.median(samples_ours)
        release_ms = statistics.median(samples_release) * 1e3 if samples_release else None
        note = f"{target}; numba imported: {'yes' if numba else 'no'}".lstrip("; ")
        table.add(what, release_ms, ours_s * 1e3, "ms", note)


def bench_generator(table: Table, release: Release | None, full: bool) -> None:
    from ace_gym.generators import generate_instance

    rows, cols, hidden, budget = (5, 7, 21, 25) if full else (5, 5, 15, 19)
    generate_instance("course", rows=5, cols=5, hidden_slots=1, decoy_budget=0, seed=0)  # numba kernels loaded
    began = time.perf_counter()
    generate_instance("course", rows=rows, cols=cols, hidden_slots=hidden, decoy_budget=budget, seed=42)
    ours_s = time.perf_counter() - began
    release_s = None
    if release is not None:
        began = time.perf_counter()
        with tempfile.TemporaryDirectory() as folder, contextlib.redirect_stdout(io.StringIO()):
            release.generate_dataset(
                "course",
                rows=rows,
                cols=cols,
                hidden_slots=[hidden],
                branch_budget=[budget],
                seed=42,
                output_dir=folder,
            )
        release_s = time.perf_counter() - began
    table.add(
        f"generator in process, course {rows}x{cols} H{hidden} B{budget} seed 42",
        None if release_s is None else release_s * 1e3,
        ours_s * 1e3,
        "ms",
        "",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, help="checkout of the published ACE-Bench release")
    parser.add_argument("--traces", type=Path, default=DEFAULT_TRACES)
    parser.add_argument("--quick", action="store_true", help="few repetitions, no fresh processes (smoke run)")
    parser.add_argument("--full", action="store_true", help="generator row at 5x7 H21 B25 (the release: ~1 min)")
    args = parser.parse_args(argv)
    runs, number, process_runs = (2, 20, 0) if args.quick else (7, 200, 5)

    with tempfile.TemporaryDirectory(prefix="ace-bench-ref-") as folder:
        files = _decompress_bundled(Path(folder))
        scratch = Path(folder) / "scratch"
        scratch.mkdir()
        os.environ["ACE_GYM_CACHE_DIR"] = str(scratch / "cache")  # never the user's cache folder
        release = None
        if args.reference is not None:
            with contextlib.redirect_stdout(io.StringIO()):
                release = Release(args.reference.resolve(), Path(folder))
        for domain in DOMAIN_NAMES:  # warm: every instance compiled once, as in a training process
            dataset = resolve_dataset("5x5", domain)
            for index in range(len(dataset)):
                dataset.compiled(index)
        table = Table(release is not None)
        who = f"release at {args.reference} vs ace-gym" if release else "ace-gym alone (no --reference)"
        print(f"{who}; best of {runs} interleaved runs, ratio = release / ace-gym (higher: ace-gym faster)\n")
        table.header()
        traces = _load_traces(args.traces)
        bench_episodes(table, release, traces, runs)
        bench_score(table, release, number, runs)
        bench_cold(table, release, number, runs)
        bench_cold_tools(table, release, traces, 10 * runs)  # each sample reads a dataset (~1 ms)
        bench_load(table, release, files, runs, scratch)
        if process_runs:
            bench_processes(table, release, files, args.traces, process_runs, scratch)
            bench_generator(table, release, args.full)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
