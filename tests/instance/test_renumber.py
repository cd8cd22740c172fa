"""Item names without the published data's tell (issue 38): the name-order tell is real on the
published 5x5 data, ``item_names="renumbered"`` removes it without changing the instance, and
the training defaults do not have it."""

from __future__ import annotations

import numpy as np
import pytest

from ace_gym.agents.blind import CheckGuidedSearch, SmallestName
from ace_gym.domains import DOMAIN_NAMES
from ace_gym.envs import AceEnv
from ace_gym.errors import ConfigError
from ace_gym.eval import EpisodeSpec, run_episodes
from ace_gym.eval.fit import TRAINING_DATASET, fit_spec
from ace_gym.instance import name_number, renumber_names, resolve_dataset
from ace_gym.stats import mean

TOLERANCE = 0.1
"""How far above random slot-valid play the smallest-name policy may score where there is no tell."""


def scores(specs: list[EpisodeSpec], policy: object) -> float:
    return mean(record["score"] for record in run_episodes(specs, policy))


def all_of(dataset: str, **env_kwargs: object) -> list[EpisodeSpec]:
    return [
        EpisodeSpec.of(domain, dataset, instance_index=i, seed=i, env_kwargs=env_kwargs)
        for domain in DOMAIN_NAMES
        for i in range(len(resolve_dataset(dataset, domain)))
    ]


def test_published_5x5__the_smallest_name_is_the_truth_in_every_instance() -> None:
    """The documented fact (docs/compatibility.md §7): reading names wins all 210 instances."""
    specs = all_of("5x5")
    assert len(specs) == 210
    assert scores(specs, SmallestName()) == 1.0


def test_renumbered_5x5__the_smallest_name_policy_is_at_chance() -> None:
    specs = all_of("5x5", item_names="renumbered")[::2]
    by_name, random_valid = scores(specs, SmallestName()), scores(specs, CheckGuidedSearch(max_calls=1))
    assert by_name <= random_valid + TOLERANCE and by_name < 0.4, (by_name, random_valid)


def test_training_defaults__have_no_name_tell() -> None:
    """The recipes' data (the bundled 5x7 set) and fit_spec on the published data."""
    fresh = all_of(TRAINING_DATASET)[::4]
    by_name, random_valid = scores(fresh, SmallestName()), scores(fresh, CheckGuidedSearch(max_calls=1))
    assert by_name <= random_valid + TOLERANCE, (by_name, random_valid)
    fit = [fit_spec(spec) for spec in all_of("5x5")[::5]]
    assert {spec.stack.env_kwargs["item_names"] for spec in fit} == {"renumbered"}
    assert scores(fit, SmallestName()) < 0.4


def test_trl_environment_factory__renumbers_the_published_names_unless_told_otherwise() -> None:
    pytest.importorskip("trl")
    from ace_gym.integrations.trl import environment_class

    assert environment_class("course").env_kwargs == {"item_names": "renumbered"}
    assert environment_class("course", env_kwargs={"item_names": "published"}).env_kwargs["item_names"] == "published"
    assert "item_names" not in environment_class("course", dataset=TRAINING_DATASET).env_kwargs


def test_renumber_names__keeps_the_instance_and_permutes_the_numbers() -> None:
    compiled = resolve_dataset("5x5", "meal").compiled(20)
    renamed = renumber_names(compiled, np.random.default_rng(3))
    before, after = compiled.instance, renamed.instance
    assert list(after.item_pool) == list(before.item_pool)
    for item_id, item in before.item_pool.items():
        other = after.item_pool[item_id]
        assert list(other) == list(item) and {k: v for k, v in other.items() if k != "name"} == {
            k: v for k, v in item.items() if k != "name"
        }
        assert other["name"].rpartition(" ")[0] == item["name"].rpartition(" ")[0]  # the phrase stays
    assert sorted(i["name"].rpartition(" ")[2] for i in after.item_pool.values()) == sorted(
        i["name"].rpartition(" ")[2] for i in before.item_pool.values()
    )
    assert after.model_dump(exclude={"item_pool"}) == before.model_dump(exclude={"item_pool"})
    assert np.array_equal(renamed.truth, compiled.truth)
    truth_first = sum(
        min(slot.candidate_items, key=lambda k: name_number(renamed.item(k)["name"])) == renamed.truth[slot.cell]
        for slot in renamed.slots
    )
    assert truth_first < len(renamed.slots) / 2  # in the published names it is every slot


def test_renumbered_env__same_seed_same_names_other_seed_or_instance_other_names() -> None:
    def names(seed: int, index: int) -> list[str]:
        env = AceEnv("course", item_names="renumbered")
        env.reset(seed=seed, options={"instance_index": index})
        return [env.compiled.item(k)["name"] for k in range(len(env.compiled.item_ids))]

    assert names(4, 30) == names(4, 30)
    assert names(4, 30) != names(5, 30)
    published = AceEnv("course")
    published.reset(seed=4, options={"instance_index": 30})
    assert names(4, 30) != [published.compiled.item(k)["name"] for k in range(len(published.compiled.item_ids))]
    # one seed, two instances of the same pool size: renamed independently, not by one permutation
    sizes = [len(resolve_dataset("5x5", "course").compiled(i).item_ids) for i in range(35)]
    first, second = [i for i in range(35) if sizes[i] == sizes[0]][:2]
    ranks = [np.argsort([name_number(n) for n in names(4, index)]).tolist() for index in (first, second)]
    assert ranks[0] != ranks[1]


def test_renumbered_env__plays_and_scores_as_published() -> None:
    specs = [EpisodeSpec.of("travel", instance_index=i, seed=i) for i in (0, 17, 34)]
    renamed = [
        EpisodeSpec.of("travel", instance_index=i, seed=i, env_kwargs={"item_names": "renumbered"}) for i in (0, 17, 34)
    ]
    for plain, other in zip(
        run_episodes(specs, CheckGuidedSearch()), run_episodes(renamed, CheckGuidedSearch()), strict=True
    ):
        assert (plain["score"], plain["usage"]["turns"]) == (other["score"], other["usage"]["turns"])
    with pytest.raises(ConfigError, match="item_names"):
        AceEnv("travel", item_names="shuffled")
