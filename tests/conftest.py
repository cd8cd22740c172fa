"""Shared fixtures: the published release's reference material, copied into ``tests/data``.

``tests/data`` holds the tool-call traces recorded with the published ACE-Bench release, a prompt
it rendered and the SHA-256 digests of its six 5x5 dataset files (MIT, see the licence file there).
The dataset files themselves are the ones ace-gym bundles gzipped; :func:`published_file` gives
them back as the plain ``.json`` files the release ships, checked against those digests.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ace_gym.envs import AceEnv
from ace_gym.instance import bundled_dataset_path
from ace_gym.tools import TOOL_CALL_FAILED

DATA = Path(__file__).resolve().parent / "data"


def pytest_configure() -> None:
    # validated-dataset cache entries go to a folder of this run (and its subprocesses), not ~/.cache
    os.environ["ACE_GYM_CACHE_DIR"] = tempfile.mkdtemp(prefix="ace-gym-cache-")


PUBLISHED_SHA256: dict[str, str] = json.loads((DATA / "published_5x5_sha256.json").read_text())


@functools.cache
def _published_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="ace-gym-published-"))


@functools.cache
def published_file(domain: str) -> Path:
    """The published 5x5 dataset file of ``domain`` as the release ships it (plain JSON)."""
    bundled = bundled_dataset_path("5x5", domain)
    name = bundled.name.removesuffix(".gz")
    raw = gzip.decompress(bundled.read_bytes())
    digest = hashlib.sha256(raw).hexdigest()
    if digest != PUBLISHED_SHA256[name]:
        raise AssertionError(f"bundled {bundled.name} is not the published {name} (sha256 {digest})")
    path = _published_dir() / name
    path.write_bytes(raw)
    return path


def published_file_named(file_name: str) -> Path:
    """The published file called ``file_name`` (e.g. a trace's ``dataset_file``)."""
    return published_file(file_name.split("_dataset_")[0])


def load_traces() -> list[dict]:
    with gzip.open(DATA / "parity_traces_5x5.jsonl.gz", "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def trace_env(trace: dict, dataset: Any = None, **source: Any) -> AceEnv:
    """A core env configured like the recorded trace: its data file (or ``dataset``, or a
    ``source=``) and task_config."""
    config = trace["task_config"]
    return AceEnv(
        trace["domain"],
        dataset=published_file_named(trace["dataset_file"]) if dataset is None and not source else dataset,
        extra_query_num=config["extra_query_num"],
        global_check_alpha=config["global_check_alpha"],
        check_include_reason=config["check_include_reason"],
        max_query_ids=config["max_query_ids"],
        max_query_fields=config["max_query_fields"],
        **source,
    )


def replay_trace(env: AceEnv, trace: dict) -> None:
    """Replay a recorded reference trace on ``env`` (a core env configured like it): every
    observation and the final score, reason, grid and budgets as recorded (AssertionError otherwise)."""
    _, info = env.reset(options={"instance_index": trace["instance_index"]})
    assert info["instance_id"] == trace["instance_id"]
    budgets = info["budgets"]
    assert budgets["global_check_budget"] == trace["initial_budgets"]["global_check_budget"]
    assert budgets["hidden_slot_query_budget"] == trace["initial_budgets"]["hidden_slot_query_budget"]
    final_info: dict = {}
    for k, call in enumerate(trace["calls"]):
        if call["content"] == TOOL_CALL_FAILED:
            continue  # injected failure: the release never ran this call (failure injection is a wrapper)
        observation, _reward, terminated, truncated, info = env.step({"name": call["tool"], "arguments": call["args"]})
        if call["exception"] is not None:
            envelope = json.loads(observation)
            assert envelope["status"] == "failed" and envelope["messages"].startswith("Invalid tool arguments, "), (
                k,
                observation,
            )
        else:
            assert observation == call["content"], f"call {k} {call['tool']}({call['args']})"
        if terminated or truncated:
            final_info = info
    final = trace["final"]
    if not final_info:  # the trace did not end with a successful done: score the grid as it stands
        final_info = env.unwrapped.step({"name": "done", "arguments": {}})[4]
    assert final_info["score"] == final["eval"]["score"]
    assert final_info["reason"] == final["eval"]["reason"]
    assert final_info["grid"] == final["agent_solution"]
    state = env.state
    assert state.global_calls == final["global_check_calls"]
    calls = {f"{s.row},{s.col}": n for s, n in zip(state.compiled.slots, state.query_calls, strict=False) if n}
    assert calls == {k: v for k, v in final["hidden_slot_query_calls"].items() if v}
