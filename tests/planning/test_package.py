"""ace_gym.planning exports its names lazily: registering the env ids loads none of the probes."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import ace_gym.planning

ROOT = Path(__file__).resolve().parents[2]


def test_import__ace_gym_loads_no_planning_probe() -> None:
    probes = ("detector", "knowledge", "plans", "unsolvable")
    code = (
        "import sys, ace_gym\n"
        f"loaded = sorted(m for m in {probes!r} if f'ace_gym.planning.{{m}}' in sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=False, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("name", ace_gym.planning.__all__)
def test_planning__exports_each_name_from_its_module(name: str) -> None:
    found = getattr(ace_gym.planning, name)
    home = importlib.import_module(f"ace_gym.planning.{ace_gym.planning._HOMES[name]}")
    assert found is getattr(home, name) and name in dir(ace_gym.planning)


def test_planning__unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        ace_gym.planning.nothing  # noqa: B018
