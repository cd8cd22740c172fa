"""Instance sources: one env class serves a dataset, a generator or any object with ``draw``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from ace_gym.domains import get_domain
from ace_gym.envs import AceEnv, DatasetSource, Drawn, InstanceSource
from ace_gym.errors import ConfigError
from ace_gym.instance import load_dataset, resolve_dataset


class _Replay:
    """A source that serves the given instance indices of a dataset in turn (ignores the rng)."""

    def __init__(self, domain: str, indices: list[int]) -> None:
        self.dataset = resolve_dataset("5x5", domain)
        self.domain = self.dataset.domain
        self.indices = indices
        self.draws = 0

    def draw(self, rng: np.random.Generator, options: Mapping[str, Any]) -> Drawn:
        index = self.indices[self.draws % len(self.indices)]
        self.draws += 1
        return Drawn(self.dataset.compiled(index), index, {"replayed": self.draws})


def test_dataset_source__same_draws_as_the_dataset_argument() -> None:
    by_name = AceEnv("travel", "5x5")
    by_source = AceEnv("travel", source=DatasetSource(resolve_dataset("5x5", "travel")))
    for seed in range(4):
        assert by_name.reset(seed=seed) == by_source.reset(seed=seed)
    assert by_source.dataset is by_name.dataset


def test_dataset_source__loaded_file_serves_its_instances() -> None:
    dataset = load_dataset(resolve_dataset("5x5", "meal").source)
    env = AceEnv("meal", source=DatasetSource(dataset))
    _, info = env.reset(options={"instance_index": np.int64(3)})  # numpy integers are integers
    assert (info["instance_index"], info["instance_id"]) == (3, dataset.instance_ids[3])


@pytest.mark.parametrize("index", [True, -1, 35, 1.0, "2"])
def test_dataset_source__bad_instance_index_is_a_config_error(index: Any) -> None:
    with pytest.raises(ConfigError) as raised:
        AceEnv("course").reset(options={"instance_index": index})
    assert raised.value.field == "instance_index" and raised.value.problem == "must be an integer in [0, 34]"


def test_custom_source__needs_no_env_class_and_adds_its_info_keys() -> None:
    source = _Replay("shopping", [4, 9])
    assert isinstance(source, InstanceSource)
    env = AceEnv("shopping", source=source)
    indices = [env.reset(seed=0)[1]["instance_index"] for _ in range(3)]
    _, info = env.reset()
    assert indices == [4, 9, 4] and info["replayed"] == 4 and list(info)[-1] == "replayed"
    assert info["domain"] == "shopping" and env.dataset is None


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"dataset": "5x5", "source": DatasetSource(resolve_dataset("5x5", "course"))}, "dataset"),
        ({"source": DatasetSource(resolve_dataset("5x5", "meal"))}, "source"),
        ({"source": "5x5"}, "source"),
    ],
    ids=["dataset and source", "another domain", "not a source"],
)
def test_source__conflicting_or_foreign_source_is_a_config_error(arguments: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as raised:
        AceEnv("course", **arguments)
    assert raised.value.field == field


def test_ace_env__has_no_instance_selection_hook() -> None:
    assert not hasattr(AceEnv, "_select_instance")
    assert get_domain("course") is AceEnv("course").source.domain
