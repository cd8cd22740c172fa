"""``ace-gym eval --backend ray`` / :func:`run_on_ray` on a local Ray cluster: the local backend's
records (apart from wall-clock usage), resume across backends, a killed worker's episodes re-run
exactly once, errors raised as themselves. Skipped only when ray is not installed."""

from __future__ import annotations

import importlib.util
import logging
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from ace_gym.errors import ConfigError
from ace_gym.eval import EpisodeSpec, run_episodes
from ace_gym.eval.ray_backend import run_on_ray
from ace_gym.policies import make_policy
from ace_gym.runs.loop import WALL_CLOCK_USAGE
from ace_gym.runs.results import encode_json, read_records
from tests.eval.test_cli import run_cli
from tests.ray_helpers import local_cluster

needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed")
SLICE = ["--domains", "course,travel", "--hidden-slots", "1,5", "--decoy-budgets", "0,4"]  # 2 domains x 4 instances


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with local_cluster() as ray:  # installed (needs_ray): an import error here is a broken install and fails
        yield ray


def without_wall_clock(record: dict[str, Any]) -> bytes:
    usage = {name: value for name, value in record["usage"].items() if name not in WALL_CLOCK_USAGE}
    return encode_json({**record, "usage": usage})


def by_key(records: Iterator[dict[str, Any]] | list[dict[str, Any]]) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for record in records:
        assert record["key"] not in found, f"{record['key']} twice"
        found[record["key"]] = without_wall_clock(record)
    return found


def solver_on_ray(specs: list[EpisodeSpec], **options: Any) -> Iterator[dict[str, Any]]:
    """The records of ``specs`` played by the solver on Ray, one episode at a time per worker."""
    return run_on_ray(
        specs,
        partial(EpisodeSpec.key, policy="solver"),
        run_episodes,
        partial(make_policy, "solver"),
        name="solver",
        batch_size=1,
        **options,
    )


@needs_ray
@pytest.mark.slow
def test_eval__ray_backend_writes_the_local_records_and_resumes_a_run(cluster: Any, tmp_path: Path) -> None:
    arguments = ["--policy", "greedy", *SLICE, "--tool-failure-rates", "0,0.1"]
    assert run_cli(*arguments, "--out", str(tmp_path / "local")) == 0
    ray_run = [*arguments, "--out", str(tmp_path / "ray"), "--backend", "ray", "--ray-workers", "3"]  # > 2 CPUs
    assert run_cli(*ray_run[:-4], "--hidden-slots", "1", *ray_run[-4:]) == 0  # half the run, then resume it
    assert len(list(read_records(tmp_path / "ray" / "episodes.jsonl"))) == 8
    assert run_cli(*ray_run) == 0
    local = by_key(read_records(tmp_path / "local" / "episodes.jsonl"))
    assert len(local) == 16
    assert by_key(read_records(tmp_path / "ray" / "episodes.jsonl")) == local


@needs_ray
@pytest.mark.slow
def test_eval__ray_workers_play_against_an_env_server(cluster: Any, tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from tests.server_helpers import serving

    arguments = ["--policy", "solver", "--domains", "course", "--hidden-slots", "1,5", "--decoy-budgets", "0"]
    assert run_cli(*arguments, "--out", str(tmp_path / "local")) == 0
    with serving() as (url, _):
        assert run_cli(*arguments, "--out", str(tmp_path / "ray"), "--backend", "ray", "--env-url", url) == 0
    local = by_key(read_records(tmp_path / "local" / "episodes.jsonl"))
    assert len(local) == 2 and by_key(read_records(tmp_path / "ray" / "episodes.jsonl")) == local


@needs_ray
@pytest.mark.slow
def test_run_on_ray__a_killed_workers_episodes_run_again_exactly_once(
    cluster: Any, caplog: pytest.LogCaptureFixture
) -> None:
    specs = [EpisodeSpec.of("course", instance_index=index, tool_failure_rate=0.1) for index in range(12)]
    local = by_key(run_episodes(specs, make_policy("solver"), batch_size=1))
    records = solver_on_ray(specs, workers=2, chunk_size=2)
    received = []
    with caplog.at_level(logging.WARNING, logger="ace_gym.eval.ray_backend"):
        for record in records:
            if not received:  # both workers hold two chunks now: kill one of them
                victim = sorted(name for name in cluster.util.list_named_actors() if name.startswith("ace-gym-eval-"))
                cluster.kill(cluster.get_actor(victim[0]))
            received.append(record)
    assert by_key(received) == local
    assert "died" in caplog.text and "re-running its" in caplog.text


@needs_ray
@pytest.mark.slow
def test_run_on_ray__an_error_in_a_rollout_is_raised_as_itself(cluster: Any, tmp_path: Path) -> None:
    specs = [EpisodeSpec.of("course", dataset=str(tmp_path / "missing.json"), instance_index=0)]
    with pytest.raises(ConfigError, match=r"missing\.json"):
        list(solver_on_ray(specs, workers=1))


@needs_ray
@pytest.mark.slow
def test_eval__ray_workers_on_an_unreachable_endpoint_exit_7_with_one_line_and_store_nothing(
    cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    pytest.importorskip("openai")
    from ace_gym.exit_codes import EXIT_ENGINE
    from tests.chat_server import ChatServer, chat_response
    from tests.eval.test_cli import MEAL, one_error_line

    server = ChatServer(lambda body: (200, chat_response("never")), listening=False)  # refuses connections
    out = tmp_path / "ray"
    try:
        arguments = ["--policy", f"openai:fake@{server.url}", "--engine-option", "max_retries=0", *MEAL]
        assert run_cli(*arguments, "--out", str(out), "--backend", "ray", "--ray-workers", "1") == EXIT_ENGINE
    finally:
        server.close()
    line = one_error_line(capsys)  # the worker's error as its one line, not Ray's traceback
    assert f"model endpoint {server.url}" in line and "ConnectionRefusedError" in line
    assert list(read_records(out / "episodes.jsonl")) == []


def test_run_on_ray__without_ray_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import fails as if not installed
    specs = [EpisodeSpec.of("course", instance_index=0)]
    with pytest.raises(ConfigError, match=r"pip install '\.\[ray\]' in an ace-gym checkout"):
        list(solver_on_ray(specs))


def test_eval__ray_options_need_the_ray_backend(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert run_cli("--policy", "solver", "--out", str(tmp_path), "--ray-workers", "2") == 2
    assert "--ray-workers need --backend ray" in capsys.readouterr().err
    assert not (tmp_path / "episodes.jsonl").exists()


def test_import__the_eval_command_does_not_import_ray() -> None:
    code = "import sys, ace_gym, ace_gym.eval.cli, ace_gym.eval.ray_backend\nassert 'ray' not in sys.modules, 'ray imported'\n"
    subprocess.run([sys.executable, "-c", code], check=True)
