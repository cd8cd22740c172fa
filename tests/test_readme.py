"""The README's Python examples run as written; the training ones with a tiny local model and tiny
settings (:data:`TINY`: the exact text swapped, so a README edit that drops one fails here)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
TEXT = README.read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, flags=re.S)
TINY = {
    '"Qwen/Qwen3-0.6B"': "TINY_MODEL",
    "range(35)": "range(1)",
    "max_steps=500": "max_steps=1",
    "num_generations=8": "num_generations=2",
    "per_device_train_batch_size=8": "per_device_train_batch_size=4",
    "max_completion_length=4096": "max_completion_length=16",
    "max_tool_calling_iterations=40": "max_tool_calling_iterations=2",
    "max_turns=40": "max_turns=2",
    "report_to=[],": "report_to=[], use_cpu=True,",  # this machine has no GPU
}


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    pytest.importorskip("transformers")
    from ace_gym.agents.llm.tiny_model import build_tiny_model

    return str(build_tiny_model(tmp_path_factory.mktemp("tiny")))


@pytest.mark.slow
@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_python_block__runs(block: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)  # examples may write files
    namespace = {"__name__": "readme"}
    if any(heavy in block for heavy in TINY):
        for heavy, tiny in TINY.items():
            block = block.replace(heavy, tiny)
        namespace["TINY_MODEL"] = request.getfixturevalue("tiny_model")
    exec(compile(block, str(README), "exec"), namespace)


def test_readme__has_python_examples_and_every_tiny_swap_applies() -> None:
    assert len(BLOCKS) >= 3
    assert all(heavy in TEXT for heavy in TINY)
    assert len(re.findall(r"^### ", TEXT.split("## Train with…")[1].split("\n## ")[0], flags=re.M)) == 5
