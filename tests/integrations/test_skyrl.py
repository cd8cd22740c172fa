"""The SkyRL adapter through skyrl-gym's own registry and BaseTextEnv interface."""

from __future__ import annotations

from pathlib import Path

import pytest

skyrl_gym = pytest.importorskip("skyrl_gym")
datasets = pytest.importorskip("datasets")

from skyrl_gym.envs.base_text_env import BaseTextEnv  # noqa: E402

from ace_gym.eval import EpisodeSpec  # noqa: E402
from ace_gym.integrations.skyrl import ENV_CLASS, register, write_dataset  # noqa: E402
from tests.solver_text import SolverText  # noqa: E402

SPECS = [
    EpisodeSpec.of("course", instance_index=9, seed=4, max_turns=200),
    EpisodeSpec.of("travel", instance_index=3, seed=1),
]


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    path = tmp_path_factory.mktemp("skyrl") / "train.parquet"
    write_dataset(SPECS, path)
    register()
    register()  # idempotent
    return list(datasets.Dataset.from_parquet(str(path)))


def make(row: dict) -> BaseTextEnv:
    """What SkyRL's generator does with a dataset row: the other columns are the env's extras."""
    extras = {key: value for key, value in row.items() if key not in ("prompt", "env_class")}
    return skyrl_gym.make(row["env_class"], env_config={}, extras=extras)


def test_write_dataset__rows_name_the_env_class_and_the_episode(rows: list[dict]) -> None:
    assert [row["env_class"] for row in rows] == [ENV_CLASS, ENV_CLASS]
    assert [EpisodeSpec.from_json(row["extra_info"]["ace_episode"]).domain for row in rows] == ["course", "travel"]
    system, user = rows[0]["prompt"]
    assert system["role"] == "system" and "<tools>" in system["content"] and '"name": "set_slot"' in system["content"]
    assert user["role"] == "user" and "null" in user["content"]


@pytest.mark.parametrize("index", [0, 1])
def test_skyrl_env__plays_a_full_solver_episode_and_scores_one(rows: list[dict], index: int) -> None:
    env = make(rows[index])
    assert isinstance(env, BaseTextEnv)
    prompt, _ = env.init(rows[index]["prompt"])
    assert prompt == rows[index]["prompt"]
    solver = SolverText(SPECS[index])
    output = env.step(solver.next_text())
    rewards = [output["reward"]]
    while not output["done"]:
        (reply,) = output["observations"]
        assert reply["role"] == "tool"
        output = env.step(solver.next_text(reply["content"]))
        rewards.append(output["reward"])
    assert output["observations"] == [] and output["metadata"]["score"] == 1.0
    assert rewards[-1] == 1.0 and sum(rewards) == 1.0
    assert env.get_metrics() == {"score": 1.0, "turns": len(rewards)}
    env.close()


def test_skyrl_env__an_unreadable_turn_gets_a_corrective_message(rows: list[dict]) -> None:
    env = make(rows[1])
    env.init(rows[1]["prompt"])
    output = env.step("I think the answer is obvious.")
    (correction,) = output["observations"]
    assert correction["role"] == "user" and "tool call" in correction["content"]
    assert (output["reward"], output["done"]) == (0.0, False)
    assert output["metadata"]["parse_errors"] == []


@pytest.mark.parametrize(
    "spec", [EpisodeSpec.of("meal", instance_index=9, seed=4), EpisodeSpec.of("travel", instance_index=3)]
)
def test_skyrl_env__plays_a_fit_episode_with_several_calls_per_turn(
    tmp_path_factory: pytest.TempPathFactory, spec: EpisodeSpec
) -> None:
    """Under FIT (compact observations) the batching solver plays the whole H=5 / H=1 episode in
    four turns: each step is one assistant message answered by one tool message per call."""
    from ace_gym.eval.fit import fit_spec
    from tests.solver_text import BatchSolverText

    fit = fit_spec(spec)
    path = tmp_path_factory.mktemp("skyrl_fit") / "train.parquet"
    write_dataset([fit], path)
    register()
    (row,) = datasets.Dataset.from_parquet(str(path))
    assert "<tool_replies>" in row["prompt"][0]["content"]  # the compact note: several calls may go in one turn
    env = make(row)
    env.init(row["prompt"])
    solver = BatchSolverText(fit)
    output = env.step(solver.next_text())
    rewards, replies_per_turn = [output["reward"]], []
    while not output["done"]:
        replies = output["observations"]
        assert all(reply["role"] == "tool" for reply in replies)
        replies_per_turn.append(len(replies))
        output = env.step(solver.next_text([reply["content"] for reply in replies]))
        rewards.append(output["reward"])
    assert output["metadata"]["score"] == 1.0 and rewards[-1] == 1.0 and sum(rewards) == 1.0
    assert replies_per_turn == solver.calls[:-1] and max(solver.calls) > 1  # one reply per call of the turn
    assert len(rewards) <= 5 and env.get_metrics() == {"score": 1.0, "turns": len(rewards)}
    env.close()


def test_skyrl_env__ace_reward_partial_pays_the_partial_score_of_the_final_grid(tmp_path: Path) -> None:
    """A row written with ``reward="partial"``: one slot filled with a slot-valid item, then
    ``done``: the last step's reward is the partial score of that grid (one rubric item met)."""
    from ace_gym.envs import AceEnv
    from ace_gym.errors import ConfigError
    from ace_gym.feedback.rubric import graded_rules
    from tests.steering import hermes_call

    spec = EpisodeSpec.of("course", instance_index=9, seed=4)
    write_dataset([spec], tmp_path / "rows.parquet", reward="partial")
    (row,) = datasets.Dataset.from_parquet(str(tmp_path / "rows.parquet"))
    register()
    env = make(row)
    env.init(row["prompt"])
    core = AceEnv(spec.domain)
    core.reset(seed=spec.seed, options=spec.reset_options())
    compiled = core.compiled
    slot = compiled.slots[0]
    filled = env.step(hermes_call("set_slot", row=slot.row, col=slot.col, id=compiled.item_ids[min(slot.valid_items)]))
    assert not filled["done"] and filled["reward"] == 0.0
    ended = env.step(hermes_call("done"))
    assert ended["done"] and ended["reward"] == pytest.approx(1 / (len(compiled.slots) + len(graded_rules(compiled))))
    with pytest.raises(ConfigError, match="reward"):
        write_dataset([spec], tmp_path / "bad.parquet", reward="dense")
