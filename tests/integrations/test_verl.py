"""The verl agent loop, built the way verl's AgentLoopWorker builds it (registry + hydra), against
a fake server manager: verl's rollout servers (vLLM/SGLang async engines) do not run on a CPU
machine, so the server is the one part replaced."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl.experimental.agent_loop.agent_loop")
transformers = pytest.importorskip("transformers")
datasets = pytest.importorskip("datasets")

import hydra  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap, _agent_loop_registry  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

from ace_gym.agents.llm.tiny_model import build_tiny_model  # noqa: E402
from ace_gym.errors import ConfigError  # noqa: E402
from ace_gym.eval import EpisodeSpec  # noqa: E402
from ace_gym.integrations.verl import AGENT_NAME, MAX_RESUMES, AceAgentLoop, write_dataset  # noqa: E402
from tests.solver_text import SolverText, replayed_score, trained_texts  # noqa: E402

SPECS = [EpisodeSpec.of("pc_build", instance_index=9, seed=4), EpisodeSpec.of("workforce", instance_index=1, seed=2)]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return transformers.AutoTokenizer.from_pretrained(build_tiny_model(tmp_path_factory.mktemp("tiny")))


class SolverServer:
    """A server manager whose 'model' is the exact solver writing Hermes calls (logprob -0.25 each)."""

    def __init__(self, tokenizer: Any, spec: EpisodeSpec) -> None:
        self.tokenizer, self.solver, self.texts, self.requests = tokenizer, SolverText(spec), [], set()

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict, **_: Any) -> TokenOutput:
        self.requests.add(request_id)
        text = self.solver.next_text_after(self.tokenizer.decode(prompt_ids))
        self.texts.append(text)
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        ids = ids[: sampling_params.get("max_tokens")]  # as verl's servers cut a generation
        return TokenOutput(token_ids=ids, log_probs=[-0.25] * len(ids))


class AbortingServer(SolverServer):
    """verl's partial rollout as the agent loop sees it: every other turn's generation is aborted
    (``stop_reason="aborted"``) after ``kept`` of its ids; the resumed request (prompt + those
    ids) gets the rest. ``always``: every generation is aborted with nothing generated."""

    def __init__(self, tokenizer: Any, spec: EpisodeSpec, kept: int, always: bool = False) -> None:
        super().__init__(tokenizer, spec)
        self.kept, self.always, self.calls, self.aborts, self.rest = kept, always, 0, 0, None

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict, **_: Any) -> TokenOutput:
        if self.always:
            self.aborts += 1
            return TokenOutput(token_ids=[], stop_reason="aborted")
        if self.rest is not None:
            expected_prompt, rest = self.rest
            assert prompt_ids == expected_prompt  # resumed after the partial ids
            self.rest = None
            return TokenOutput(token_ids=rest, log_probs=[-0.25] * len(rest), stop_reason="completed")
        self.calls += 1
        output = await super().generate(request_id, prompt_ids=prompt_ids, sampling_params=sampling_params)
        if self.calls % 2:
            return output.model_copy(update={"stop_reason": "completed"})
        head, rest = output.token_ids[: self.kept], output.token_ids[self.kept :]
        self.rest, self.aborts = ([*prompt_ids, *head], rest), self.aborts + 1
        return TokenOutput(token_ids=head, log_probs=[-0.25] * len(head), stop_reason="aborted")


def agent_loop(tokenizer: Any, server: SolverServer, response_length: int) -> AceAgentLoop:
    """As verl's AgentLoopWorker instantiates a registered agent loop."""
    config = OmegaConf.create(
        {"actor_rollout_ref": {"rollout": {"prompt_length": 16384, "response_length": response_length}}, "data": {}}
    )
    return hydra.utils.instantiate(
        config=_agent_loop_registry[AGENT_NAME],
        trainer_config=DictConfigWrap(config=config),
        server_manager=server,
        tokenizer=tokenizer,
        processor=None,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data),
        tools=ToolListWrap([]),
    )


@pytest.mark.parametrize("index", [0, 1])
def test_verl_agent_loop__plays_a_full_solver_episode_token_exact_and_scores_one(tokenizer: Any, index: int) -> None:
    server = SolverServer(tokenizer, SPECS[index])
    loop = agent_loop(tokenizer, server, response_length=10**6)
    assert isinstance(loop, AceAgentLoop)
    output = asyncio.run(loop.run({"temperature": 1.0}, extra_info={"ace_episode": SPECS[index].to_json()}))
    assert output.reward_score == 1.0 and output.extra_fields["ace_score"] == 1.0
    assert len(server.requests) == 1  # one sticky session for the whole episode
    response, mask = output.response_ids, output.response_mask
    assert len(response) == len(mask) == len(output.response_logprobs)
    runs: list[tuple[int, list[int]]] = []
    for token, generated in zip(response, mask, strict=True):
        if runs and runs[-1][0] == generated:
            runs[-1][1].append(token)
        else:
            runs.append((generated, [token]))
    generated_runs = [tokenizer.decode(ids, skip_special_tokens=True) for kept, ids in runs if kept]
    assert generated_runs == server.texts and runs[-1][0] == 1  # ends with the last turn
    assert all("<tool_response>" in tokenizer.decode(ids) for kept, ids in runs if not kept)
    assert {lp for lp, kept in zip(output.response_logprobs, mask, strict=True) if not kept} == {0.0}
    assert tokenizer.decode(output.prompt_ids).endswith("<|im_start|>assistant\n")


@pytest.mark.parametrize("kept", [0, 5])
def test_verl_agent_loop__an_aborted_generation_is_resumed_not_played_as_a_turn(tokenizer: Any, kept: int) -> None:
    """An aborted generation (partial rollout) is no model turn: the rollout is the same as one
    never aborted (before the fix its partial text went to the env as a malformed turn)."""
    plain = asyncio.run(
        agent_loop(tokenizer, SolverServer(tokenizer, SPECS[0]), 10**6).run(
            {}, extra_info={"ace_episode": SPECS[0].to_json()}
        )
    )
    server = AbortingServer(tokenizer, SPECS[0], kept)
    output = asyncio.run(agent_loop(tokenizer, server, 10**6).run({}, extra_info={"ace_episode": SPECS[0].to_json()}))
    assert server.aborts > 5
    assert output.reward_score == 1.0 and output.extra_fields == plain.extra_fields
    assert (output.prompt_ids, output.response_ids, output.response_mask) == (
        plain.prompt_ids,
        plain.response_ids,
        plain.response_mask,
    )
    assert output.response_logprobs == plain.response_logprobs


def test_verl_agent_loop__a_generation_aborted_every_time_fails_loudly_unscored(tokenizer: Any) -> None:
    server = AbortingServer(tokenizer, SPECS[0], 0, always=True)
    with pytest.raises(RuntimeError, match="aborted"):
        asyncio.run(agent_loop(tokenizer, server, 10**6).run({}, extra_info={"ace_episode": SPECS[0].to_json()}))
    assert server.aborts == MAX_RESUMES + 1


def test_verl_extra__installs_what_verl_imports_without_requiring_it() -> None:
    """verl 0.9.1 imports cachetools (rollout router), uvicorn and fastapi (rollout servers) but
    does not require them: ``ace-gym[verl]`` must."""
    import verl

    source = Path(verl.__file__).parent
    for module, path in (("cachetools", "workers/rollout/router.py"), ("uvicorn", "workers/rollout/utils.py")):
        assert f"import {module}" in (source / path).read_text() or f"from {module} " in (source / path).read_text()
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    extra = re.search(r"^verl = \[(.*?)\]", pyproject, flags=re.M).group(1)  # type: ignore[union-attr]
    names = set(re.findall(r'"([\w-]+)', extra))
    assert {"verl", "cachetools", "uvicorn", "fastapi"} <= names


def test_verl_agent_loop__stops_at_the_response_budget_and_scores_the_grid(tokenizer: Any) -> None:
    server = SolverServer(tokenizer, SPECS[0])
    output = asyncio.run(
        agent_loop(tokenizer, server, response_length=300).run({}, extra_info={"ace_episode": SPECS[0].to_json()})
    )
    assert len(output.response_ids) <= 300 and output.reward_score == 0.0  # stopped long before done
    assert 1 < len(server.texts) < 20


def test_verl_agent_loop__a_cut_episode_is_rewarded_only_for_the_ids_it_is_trained_on(tokenizer: Any) -> None:
    """An H=5 FIT episode the batching solver solves in four turns, within response lengths that
    end it inside its third turn (the set_slot calls), before its fourth (done), and not at all:
    the reward is the score of the episode played with exactly the turns in the response verl
    trains on (a turn cut at the budget as cut), 0 until they hold every set_slot."""
    from ace_gym.eval.fit import fit_spec

    spec = fit_spec(EpisodeSpec.of("course", instance_index=9, seed=4))

    def run(response_length: int) -> Any:
        loop = agent_loop(tokenizer, BatchSolverServer(tokenizer, spec), response_length=response_length)
        return asyncio.run(loop.run({"temperature": 1.0}, extra_info={"ace_episode": spec.to_json()}))

    whole = run(10**6)
    mask = whole.response_mask
    starts = [k for k, kept in enumerate(mask) if kept and (k == 0 or not mask[k - 1])]
    assert len(starts) == 4 and whole.reward_score == 1.0 and not whole.extra_fields["ace_truncated"]
    for budget in ((starts[2] + starts[3]) // 2, starts[3]):
        output = run(budget)
        ids, mask = output.response_ids, output.response_mask
        assert len(ids) <= budget and output.extra_fields["ace_truncated"]
        texts = trained_texts(tokenizer, ids, mask)
        assert output.reward_score == replayed_score(spec, texts)
    assert run((starts[2] + starts[3]) // 2).reward_score == 0.0


def test_verl_agent_loop__ace_reward_partial_pays_the_partial_score_of_the_grid(tokenizer: Any, tmp_path: Path) -> None:
    """A row written with ``reward="partial"`` is rewarded with the partial score of its final
    grid (the cut episode above: some slots filled, no done), ``ace_score`` staying 0/1."""
    from ace_gym.eval.fit import fit_spec
    from ace_gym.integrations.rewards import partial_score

    spec = fit_spec(EpisodeSpec.of("course", instance_index=9, seed=4))
    write_dataset([spec], tmp_path / "rows.parquet", reward="partial")
    (row,) = datasets.Dataset.from_parquet(str(tmp_path / "rows.parquet"))
    assert row["extra_info"]["ace_reward"] == "partial"
    whole = asyncio.run(
        agent_loop(tokenizer, BatchSolverServer(tokenizer, spec), 10**6).run({}, extra_info=row["extra_info"])
    )
    assert whole.reward_score == 1.0 == whole.extra_fields["ace_score"]
    mask = whole.response_mask
    starts = [k for k, kept in enumerate(mask) if kept and (k == 0 or not mask[k - 1])]
    budget = (starts[2] + starts[3]) // 2  # inside the turn of set_slot calls
    cut = asyncio.run(
        agent_loop(tokenizer, BatchSolverServer(tokenizer, spec), budget).run({}, extra_info=row["extra_info"])
    )
    env = spec.make_env()
    env.reset(seed=spec.seed, options=spec.reset_options())
    for text in trained_texts(tokenizer, cut.response_ids, cut.response_mask):
        env.step(text)
    expected = partial_score(env.unwrapped.compiled, env.unwrapped.grid)
    assert 0.0 < cut.reward_score == expected < 1.0 and cut.extra_fields["ace_score"] == 0.0
    with pytest.raises(ConfigError, match="reward"):
        write_dataset([spec], tmp_path / "bad.parquet", reward="dense")


def test_write_dataset__rows_name_the_agent_loop_and_the_episode(tmp_path: Path) -> None:
    write_dataset(SPECS, tmp_path / "train.parquet")
    rows = list(datasets.Dataset.from_parquet(str(tmp_path / "train.parquet")))
    assert [row["agent_name"] for row in rows] == [AGENT_NAME] * 2
    assert [EpisodeSpec.from_json(row["extra_info"]["ace_episode"]) for row in rows] == SPECS
    assert [row["prompt"] for row in rows] == [spec.opening() for spec in SPECS]


class BatchSolverServer(SolverServer):
    """:class:`SolverServer` with the batching solver: every call of a turn in one generation."""

    def __init__(self, tokenizer: Any, spec: EpisodeSpec) -> None:
        from tests.solver_text import BatchSolverText

        self.tokenizer, self.solver, self.texts, self.requests = tokenizer, BatchSolverText(spec), [], set()


@pytest.mark.parametrize("index", [0, 1])  # H=5, H=1
def test_verl_agent_loop__plays_a_fit_episode_with_several_calls_per_turn_token_exact(
    tokenizer: Any, index: int
) -> None:
    from ace_gym.eval.fit import fit_spec
    from tests.solver_text import played_conversation

    spec = fit_spec(SPECS[index])
    server = BatchSolverServer(tokenizer, spec)
    output = asyncio.run(
        agent_loop(tokenizer, server, response_length=10**6).run({}, extra_info={"ace_episode": spec.to_json()})
    )
    assert output.reward_score == 1.0 and max(server.solver.calls) > 1
    assert len(server.texts) == output.extra_fields["ace_turns"] <= 5  # one sample turn per generation
    mask = output.response_mask
    generated_runs = sum(1 for k, kept in enumerate(mask) if kept and (k == 0 or not mask[k - 1]))
    assert generated_runs == len(server.texts)
    # the ids verl trains on are the chat template's rendering of the whole conversation
    messages, tools = played_conversation(spec, server.texts)
    assert sum(m["role"] == "assistant" for m in messages) == len(server.texts)
    assert sum(m["role"] == "tool" for m in messages) == sum(server.solver.calls[:-1])
    rendered = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False).removesuffix("\n")
    assert tokenizer.decode(output.prompt_ids + output.response_ids) == rendered
    assert output.prompt_ids + output.response_ids == tokenizer.encode(rendered, add_special_tokens=False)


class AskedServer(BatchSolverServer):
    """:class:`BatchSolverServer` that keeps the ``max_tokens`` of every request."""

    def __init__(self, tokenizer: Any, spec: EpisodeSpec) -> None:
        super().__init__(tokenizer, spec)
        self.asked: list[int] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict, **_: Any) -> TokenOutput:
        self.asked.append(sampling_params["max_tokens"])
        return await super().generate(request_id, prompt_ids=prompt_ids, sampling_params=sampling_params)


def test_verl_agent_loop__max_turn_tokens_of_the_rows_caps_each_turn(tokenizer: Any, tmp_path: Path) -> None:
    """verl's sampling params carry no length (each turn would get all the room left in
    ``response_length``): rows written with ``max_turn_tokens=48`` give every turn at most 48 new
    tokens, as evaluation caps a turn, and at most the room left near the end of the budget; a cap
    or a response length that is no positive integer is a ConfigError naming it."""
    from ace_gym.eval.fit import fit_spec

    spec = fit_spec(EpisodeSpec.of("course", instance_index=9, seed=4))
    write_dataset([spec], tmp_path / "rows.parquet", max_turn_tokens=48)
    (row,) = datasets.Dataset.from_parquet(str(tmp_path / "rows.parquet"))
    assert row["extra_info"]["ace_max_turn_tokens"] == 48
    server = AskedServer(tokenizer, spec)
    output = asyncio.run(agent_loop(tokenizer, server, 10**6).run({}, extra_info=row["extra_info"]))
    assert len(server.asked) >= 2 and set(server.asked) == {48}
    mask = output.response_mask
    starts = [k for k, kept in enumerate(mask) if kept and (k == 0 or not mask[k - 1])]
    ends = [k for k in range(1, len(mask) + 1) if mask[k - 1] and (k == len(mask) or not mask[k])]
    lengths = [end - start for start, end in zip(starts, ends, strict=True)]
    assert lengths[0] == 48 and max(lengths) <= 48
    near_end = AskedServer(tokenizer, spec)
    asyncio.run(agent_loop(tokenizer, near_end, 20).run({}, extra_info=row["extra_info"]))
    assert near_end.asked == [20]
    with pytest.raises(ConfigError, match="max_turn_tokens"):
        write_dataset([spec], tmp_path / "bad.parquet", max_turn_tokens=0)
    for extra_info, response_length, field in (
        ({**row["extra_info"], "ace_max_turn_tokens": 0}, 10**6, "extra_info.ace_max_turn_tokens"),
        (row["extra_info"], 0, "rollout.response_length"),
    ):
        with pytest.raises(ConfigError) as refused:
            asyncio.run(
                agent_loop(tokenizer, AskedServer(tokenizer, spec), response_length).run({}, extra_info=extra_info)
            )
        assert refused.value.field == field
