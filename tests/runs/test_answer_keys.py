"""Answer keys stay home (issue 38): what crosses to a client (``ace-gym serve`` results and MCP
``metadata``, openenv-core's ``Environment``, trainer dataset rows, verifiers tasks) carries no
answer key unless the client asks for the grader channel by name."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from ace_gym.eval import EpisodeSpec
from ace_gym.instance import resolve_dataset
from ace_gym.runs.answer_keys import ANSWER_KEYS, GRADER, client_info

STACKS: dict[str, dict[str, Any]] = {
    "ALB-QA-v0": {"kwargs": {"target_tokens": 12000}},
    "ACE-course-unsolvable-v0": {"kwargs": {}},
    "ACE-StepWise-v0": {"kwargs": {"domain": "course", "position": "early", "horizon": 1}},
}
"""An env whose infos hold each answer key: the gold answer, the unsolvable kind, the reference's calls."""
STEPS: dict[str, Any] = {
    "ALB-QA-v0": "1",
    "ACE-course-unsolvable-v0": {"name": "done", "arguments": {}},
    "ACE-StepWise-v0": '[{"tool": "done", "arguments": {}}]',
}


def paths(value: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every key path in a JSON-like value."""
    if isinstance(value, Mapping):
        for key, inner in value.items():
            yield (*prefix, str(key))
            yield from paths(inner, (*prefix, str(key)))
    elif isinstance(value, list | tuple):
        for inner in value:
            yield from paths(inner, prefix)


def answer_keys_in(value: Any) -> set[tuple[str, ...]]:
    return {path for path in paths(value) if path in ANSWER_KEYS}


def test_client_info__drops_each_answer_key_without_changing_the_info() -> None:
    info = {"gt": "7", "reference": [1], "apb": {"unsolvable": {"kind": "missing_tool"}, "broken_tool": {}}, "ok": True}
    snapshot = json.dumps(info)
    assert client_info(info) == {"apb": {"broken_tool": {}}, "ok": True}
    assert json.dumps(info) == snapshot
    assert client_info(info, [GRADER]) is info
    plain = {"ok": True, "apb": {"extraneous_tools": {}}}
    assert client_info(plain) is plain  # nothing to drop: not even copied


@pytest.mark.parametrize("env_id", sorted(STACKS))
def test_server_session__sends_no_answer_key_unless_the_grader_channel_is_asked(env_id: str) -> None:
    pytest.importorskip("pydantic")
    from ace_gym.server.factory import EnvFactory
    from ace_gym.server.mcp import call_tool_step
    from ace_gym.server.protocol import MakeRequest, ResetRequest
    from ace_gym.server.sessions import Session

    factory = EnvFactory([env_id])

    def sent_infos(request: dict[str, Any]) -> list[Any]:
        """The infos a session made with ``request`` sends: reset, step, and an MCP call's metadata."""
        session = Session("s", env_id, "ws")
        session.make(factory, MakeRequest.model_validate(request))
        infos = [session.reset(factory, ResetRequest(seed=1))["observation"]["info"]]
        infos.append(session.step(STEPS[env_id])["observation"]["info"])
        if env_id != "ACE-StepWise-v0":  # one step ends a StepWise episode
            session.reset(factory, ResetRequest(seed=1))
            infos.append(
                call_tool_step(session, {"tool_name": "done", "arguments": {}})["observation"]["metadata"]["info"]
            )
        session.close_env()
        return infos

    assert [answer_keys_in(info) for info in sent_infos(STACKS[env_id])] == [set()] * (2 if "StepWise" in env_id else 3)
    graded = sent_infos({**STACKS[env_id], "channels": [GRADER]})
    assert set().union(*map(answer_keys_in, graded))  # the grader channel holds them: the env does put them in info


def test_openenv_environment__sends_no_answer_key() -> None:
    pytest.importorskip("openenv.core")
    from ace_gym.integrations.openenv import AceEnvironment, ToolCallAction

    environment = AceEnvironment("ACE-course-unsolvable-v0")
    reset = environment.reset(seed=1)
    step = environment.step(ToolCallAction(name="done", arguments={}))
    environment.close()
    assert [answer_keys_in(observation.info) for observation in (reset, step)] == [set(), set()]


def hidden_truth_ids(spec: EpisodeSpec) -> set[str]:
    compiled = resolve_dataset(spec.dataset, spec.domain).compiled(spec.instance_index or 0)
    return {compiled.item_ids[compiled.truth[slot.cell]] for slot in compiled.slots}


SPECS = [EpisodeSpec.of("meal", "5x7", instance_index=40, seed=2), EpisodeSpec.of("course", instance_index=30, seed=1)]


def assert_no_answer(rows: list[Any]) -> None:
    text = json.dumps(rows, default=str)
    for spec in SPECS:
        assert not {i for i in hidden_truth_ids(spec) if f'"{i}"' in text or f"'{i}'" in text}
    assert answer_keys_in(rows) == set()


def test_trainer_rows__carry_no_truth_id_or_answer_key(tmp_path: Any) -> None:
    import ace_gym.integrations.openrlhf as agent_func

    agent_func.write_dataset(SPECS, tmp_path / "rows.jsonl")
    assert_no_answer([json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()])
    pytest.importorskip("datasets")
    from ace_gym.integrations.trl import train_dataset

    assert_no_answer(train_dataset(SPECS).to_list())


def test_verifiers_tasks__carry_no_truth_id_or_answer_key() -> None:
    pytest.importorskip("verifiers.v1")
    from ace_gym.integrations.verifiers import task_data

    assert_no_answer([task_data(spec).model_dump() for spec in SPECS])
