"""generate_dataset(backend="ray") on a local Ray cluster writes the local backend's bytes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ace_gym.cli import main
from ace_gym.errors import ConfigError
from ace_gym.generators import generate_dataset
from ace_gym.generators.config import GenerationError
from ace_gym.generators.ray_backend import map_on_ray
from tests.ray_helpers import local_cluster

ray = pytest.importorskip("ray")

SMALL = {"rows": 5, "cols": 7, "hidden_slots": [1, 5, 7], "decoy_budgets": [0, 4], "candidates_per_slot": 25}


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    with local_cluster():
        yield


@pytest.mark.slow
def test_generate_dataset__ray_backend_writes_the_local_bytes(cluster: None, tmp_path: Path) -> None:
    calls: list[tuple[int, int]] = []
    local = generate_dataset("travel", **SMALL, seed=11, path=tmp_path / "local.json.gz")
    remote = generate_dataset(
        "travel", **SMALL, seed=11, path=tmp_path / "ray.json.gz", backend="ray", progress=lambda *a: calls.append(a)
    )
    assert remote == local
    assert (tmp_path / "ray.json.gz").read_bytes() == (tmp_path / "local.json.gz").read_bytes()
    assert [done for done, _ in calls] == list(range(1, 7)) and {total for _, total in calls} == {6}


@pytest.mark.slow
def test_generate_cli__backend_ray_writes_the_local_files(cluster: None, tmp_path: Path) -> None:
    arguments = ["generate", "--domain", "meal", "pc_build", "--hidden-slots", "1", "5", "--decoy-budgets", "0", "2"]
    arguments += ["--seed", "4", "--quiet"]
    assert main([*arguments, "--output-dir", str(tmp_path / "local")]) == 0
    assert main([*arguments, "--output-dir", str(tmp_path / "ray"), "--backend", "ray"]) == 0
    local = sorted((tmp_path / "local").iterdir())
    assert len(local) == 2
    for path in local:
        assert (tmp_path / "ray" / path.name).read_bytes() == path.read_bytes()


@pytest.mark.slow
def test_generate_dataset__a_failing_ray_task_raises_the_generators_error(cluster: None, tmp_path: Path) -> None:
    with pytest.raises(GenerationError, match="no instance for domain=course"):
        generate_dataset(
            "course",
            hidden_slots=[1, 21],
            decoy_budgets=[25],
            seed=1,
            time_budget=0,
            backend="ray",
            path=tmp_path / "x",
        )
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_map_on_ray__a_failed_task_stops_the_run_without_cancelling_and_few_tasks_in_flight(
    cluster: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ray.cancel of a task whose result was on its way aborted the whole pytest process (Ray's
    "Tried to complete task that was not pending", after the failing-task test above): the
    backend no longer cancels, and keeps at most twice the CPUs (2 here) of tasks in flight."""
    waited: list[int] = []
    wait = ray.wait

    def counting_wait(references: list[object], **options: object) -> object:
        waited.append(len(references))
        return wait(references, **options)

    def refuse_cancel(*arguments: object, **options: object) -> None:
        raise AssertionError("ray.cancel called")

    monkeypatch.setattr(ray, "wait", counting_wait)
    monkeypatch.setattr(ray, "cancel", refuse_cancel)

    def job(n: int) -> int:
        if n == 5:
            raise ValueError(f"job {n} failed")
        return n * n

    assert map_on_ray(job, range(5)) == [0, 1, 4, 9, 16]
    assert max(waited) == 4
    with pytest.raises(ValueError, match="job 5 failed"):
        map_on_ray(job, range(12))
    assert max(waited) == 4


def test_generate_dataset__unknown_backend_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="backend"):
        generate_dataset("course", hidden_slots=[1], decoy_budgets=[0], seed=0, backend="dask")
