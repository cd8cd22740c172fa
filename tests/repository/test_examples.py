"""The examples run as written (small settings, tiny local model), so they cannot silently rot."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.chat_server import ChatServer, chat_response, tool_call
from tests.missing_modules import without_modules

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
OPTIONAL = ("torch", "transformers", "trl", "vllm", "openai", "datasets", "tokenizers", "art")
WITHOUT_OPTIONAL = (  # as if the optional extras were not installed
    without_modules(OPTIONAL)
    + """
import runpy
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
)


@pytest.mark.parametrize("script", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_examples__help_and_install_hint_without_the_optional_extras(script: str) -> None:
    def run(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-c", WITHOUT_OPTIONAL, str(EXAMPLES / script), *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)

    shown = run("--help")
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert shown.stdout.startswith("usage:")
    refused = run()  # the default run needs a back end: a one-line install hint, not a traceback
    assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr[-2000:]
    assert "is missing; install it with pip install '.[" in refused.stderr


def _run(script: str, *args: str) -> str:
    completed = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True, timeout=1200, check=False
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    return completed.stdout


@pytest.mark.slow
def test_collect_rollouts_example__writes_one_record_per_episode(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out = tmp_path / "rollouts.jsonl"
    stdout = _run("collect_rollouts.py", "--episodes", "3", "--num-envs", "2", "--max-turns", "1", "--out", str(out))
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 3 and len({r["key"] for r in records}) == 3
    assert all(r["usage"]["turns"] == 1 and r["turns"][0]["completion_token_ids"] for r in records)
    assert "3 episodes in" in stdout


def test_collect_rollouts_example__the_suggested_solver_policy_solves_within_the_default_turns(tmp_path: Path) -> None:
    out = tmp_path / "rollouts.jsonl"
    _run("collect_rollouts.py", "--policy", "solver", "--episodes", "2", "--num-envs", "2", "--out", str(out))
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["score"] for r in records] == [1.0, 1.0], [r["usage"]["turns"] for r in records]


def _logged(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith('{"')]  # the script's JSON lines


@pytest.mark.slow
def test_grpo_example__trains_through_environment_factory_and_logs_ace_metrics(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    stdout = _run(
        "grpo_train.py",
        *("--max-steps", "2", "--eval-every", "2", "--num-generations", "2", "--domains", "course,meal"),
        *("--episodes-per-domain", "1", "--max-completion-length", "8", "--output-dir", str(tmp_path / "out")),
    )
    by_step: dict[int, dict] = {}
    for entry in _logged(stdout):  # a step's metrics may be split over the trainer's and the callback's log
        by_step.setdefault(entry["step"], {}).update(entry)
    assert sorted(by_step) == [1, 2]
    for logged in by_step.values():
        assert "rewards/AceCourseEnvironment/mean" in logged and "loss" in logged
        assert {"ace/train/score/course", "ace/train/score/meal", "ace/train/pass@2"} <= set(logged)
    assert by_step[2]["ace/score/course"] == 0.0  # the validation callback


@pytest.mark.slow
def test_grpo_rollout_func_example__trains_through_the_collector_and_logs_ace_metrics(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    stdout = _run(
        "grpo_rollout_func.py",
        *("--max-steps", "2", "--num-generations", "2", "--domains", "course,meal", "--episodes-per-domain", "1"),
        *("--max-turns", "2", "--max-turn-tokens", "8", "--max-completion-length", "4096"),
        *("--output-dir", str(tmp_path / "out")),
    )  # an episode that fills its completion budget ends there (docs/training.md): 2 turns of 8 tokens fit
    steps = [entry for entry in _logged(stdout) if "loss" in entry]
    assert len(steps) == 2 and all("rewards/episode_score/mean" in entry for entry in steps)
    assert all(entry["ace/train/turns"] == 2.0 for entry in steps)  # every episode played both turns


@pytest.mark.slow
def test_vllm_eval_example__writes_results_in_the_eval_layout(tmp_path: Path) -> None:
    pytest.importorskip("vllm")
    stdout = _run("vllm_eval.py", "--episodes-per-domain", "1", "--max-turns", "2", "--out", str(tmp_path))
    records = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert sorted(r["domain"] for r in records) == ["course", "meal"]
    assert all(r["usage"]["turns"] == 2 and r["turns"][0]["prompt_token_ids"] for r in records)
    assert json.loads((tmp_path / "summary.json").read_text())["overall"]
    assert "results in" in stdout


@pytest.mark.slow  # importing art (litellm, weave) takes most of its 10-25 s
def test_art_rollout_example__a_solver_driven_model_scores_1_in_an_art_trajectory() -> None:
    # art is looked up, not imported: importing it patches transformers and sets environment
    # variables in the importing process, so the example runs in its own
    if importlib.util.find_spec("art") is None:
        pytest.skip("openpipe-art is not installed (the art extra)")
    from ace_gym.eval import EpisodeSpec
    from ace_gym.eval.fit import FIT, fit_spec
    from ace_gym.policies import make_scripted_policy

    spec = fit_spec(EpisodeSpec.of("course", "5x7", instance_index=0, seed=0, max_turns=1000))  # the example's defaults
    core = spec.stack.below("chat_adapter").make()
    observation, info = core.reset(seed=spec.seed, options=spec.reset_options())
    episode = make_scripted_policy(FIT["policy"]).start(observation, info, spec.seed)
    turns = 0

    def answer(body: dict) -> tuple[int, dict]:  # the stub model: the solver's next calls, from the tool replies
        nonlocal turns
        turns += 1
        last = max(k for k, m in enumerate(body["messages"]) if m["role"] != "tool")
        replies = [m["content"] for m in body["messages"][last + 1 :] if m["role"] == "tool"]
        made = episode.act(replies if episode.batched else (replies or [""])[-1])
        calls = made if isinstance(made, list) else [made]
        return 200, chat_response(
            tool_calls=[tool_call(c["name"], c["arguments"], f"call_{turns}_{k}") for k, c in enumerate(calls)]
        )

    server = ChatServer(answer)
    try:
        completed = subprocess.run(
            [
                *(sys.executable, str(EXAMPLES / "art_rollout.py"), "--base-url", server.url, "--model", "stub"),
                *("--domain", "course", "--seed", "0", "--instance-index", "0", "--max-turns", "1000"),
                *("--temperature", "0.7", "--max-turn-tokens", "48"),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},  # no download at import
        )
    finally:
        server.close()
    assert completed.returncode == 0, completed.stderr[-4000:]
    logged = json.loads(completed.stdout.strip().splitlines()[-1])
    assert logged["reward"] == 1.0 and logged["group_size"] == 1
    assert logged["turns"] == turns == len(server.requests) < 10  # several calls a turn: a handful of turns
    assert server.requests[0]["messages"][0]["content"] == info["system_prompt"]  # the compact one
    # every sampling setting is sent (none of the server's defaults, e.g. a model's top-k, applies)
    # and each turn is capped
    sent = {key: {r[key] for r in server.requests} for key in ("temperature", "top_p", "top_k", "min_p", "max_tokens")}
    assert sent == {"temperature": {0.7}, "top_p": {1.0}, "top_k": {-1}, "min_p": {0.0}, "max_tokens": {48}}
    assert {r["repetition_penalty"] for r in server.requests} == {1.0}
    assistant = [m for m in logged["messages"] if m["role"] == "assistant"]
    assert len(assistant) == turns and all(m["trainable"] for m in assistant)  # every model turn is a Choice
    assert [m["role"] for m in logged["messages"][:2]] == ["system", "user"]
    assert [t["function"]["name"] for t in logged["tools"]] == [t["function"]["name"] for t in info["tools"]]
    assert logged["metadata"] == {"domain": "course", "instance_id": info["instance_id"], "seed": 0}


@pytest.mark.parametrize(
    ("setting", "value"),
    [("--max-turn-tokens", "0"), ("--max-turn-tokens", "-5"), ("--temperature", "-1"), ("--temperature", "nan")],
)
def test_art_rollout_example__a_bad_sampling_setting_is_one_line_before_any_request(setting: str, value: str) -> None:
    """The example sends its sampling settings to the server as they are: a turn cap below 1 or a
    negative or NaN temperature is refused up front, naming the option, before ``art`` is imported."""
    completed = subprocess.run(
        [sys.executable, "-c", WITHOUT_OPTIONAL, str(EXAMPLES / "art_rollout.py"), setting, value],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 2 and "Traceback" not in completed.stderr, completed.stderr[-2000:]
    assert setting in completed.stderr.splitlines()[-1]
