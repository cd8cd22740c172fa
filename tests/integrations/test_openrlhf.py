"""The OpenRLHF agent_func through OpenRLHF's own MultiTurnAgentExecutor loop (engine faked: no GPU)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("openrlhf.utils.agent")
transformers = pytest.importorskip("transformers")

import ace_gym.integrations.openrlhf as agent_func  # noqa: E402
from ace_gym.agents.llm.tiny_model import build_tiny_model  # noqa: E402
from ace_gym.chat_template import template_message  # noqa: E402
from ace_gym.errors import ConfigError  # noqa: E402
from ace_gym.eval import EpisodeSpec  # noqa: E402
from tests.solver_text import SolverText  # noqa: E402

SPECS = [EpisodeSpec.of("meal", instance_index=9, seed=4, max_turns=200), EpisodeSpec.of("shopping", instance_index=2)]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return transformers.AutoTokenizer.from_pretrained(build_tiny_model(tmp_path_factory.mktemp("tiny")))


class SolverEngine:
    """Stands in for OpenRLHF's vLLM engine: answers each prompt (token ids) with the solver's
    next call as ids, reading the last tool reply from the decoded prompt."""

    def __init__(self, tokenizer: Any, spec: EpisodeSpec) -> None:
        self.tokenizer, self.solver, self.texts = tokenizer, SolverText(spec), []

    async def generate(self, token_ids: list[int], sampling_params: Any, **kwargs: Any) -> Any:
        text = self.solver.next_text_after(self.tokenizer.decode(token_ids))
        self.texts.append(text)
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        logprobs = [{token: SimpleNamespace(logprob=-0.1)} for token in ids]
        return SimpleNamespace(
            outputs=[SimpleNamespace(token_ids=ids, text=text, finish_reason="stop", logprobs=logprobs)]
        )


def test_agent_func__is_loadable_the_way_openrlhf_loads_it() -> None:
    spec = importlib.util.spec_from_file_location("agent_module", agent_func.__file__)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    from openrlhf.utils.agent import AgentExecutorBase

    assert issubclass(module.AgentExecutor, AgentExecutorBase)


class RecordedInstance(agent_func.AgentInstance):
    """The agent instance, keeping itself in :data:`INSTANCES` (to compare its ids with OpenRLHF's)."""

    def __init__(self, tokenizer: Any, **settings: Any) -> None:
        super().__init__(tokenizer, **settings)
        INSTANCES.append(self)


INSTANCES: list[agent_func.AgentInstance] = []


@pytest.mark.parametrize("index", [0, 1])
def test_openrlhf_executor__plays_a_full_solver_episode_token_exact_and_scores_one(
    tokenizer: Any, tmp_path: Path, index: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(agent_func, "AgentInstance", RecordedInstance)
    INSTANCES.clear()
    agent_func.write_dataset(SPECS, tmp_path / "train.jsonl")
    row = json.loads((tmp_path / "train.jsonl").read_text().splitlines()[index])
    engine = SolverEngine(tokenizer, SPECS[index])
    params = SimpleNamespace(max_tokens=None, logprobs=1)
    result = asyncio.run(
        agent_func.AgentExecutor().execute(row["prompt"], row["label"], params, 10**6, tokenizer, engine)
    )
    assert result["reward"] == 1.0 and float(result["scores"]) == 1.0 and not result["truncated"]
    assert float(result["extra_logs"]["score"]) == 1.0
    tokens = result["observation_tokens"]
    ranges = result["action_ranges"]
    assert [tokenizer.decode(tokens[a:b], skip_special_tokens=True) for a, b in ranges] == engine.texts
    assert len(result["rollout_log_probs"]) == ranges[-1][1] == len(tokens)  # nothing after the last turn
    # OpenRLHF re-encodes the text of the opening and of each turn's replies: on this Qwen-style
    # byte-level BPE the round trip gives back ace-gym's token-exact ids, every one
    (instance,) = INSTANCES
    assert tokens == instance.tokens.token_ids[: len(tokens)]
    # the ids OpenRLHF assembled are the chat template's rendering of the whole conversation
    env = SPECS[index].make_env()
    _, info = env.reset(seed=SPECS[index].seed, options=SPECS[index].reset_options())
    for text in engine.texts:
        env.step(text)
    conversation = [template_message(m) for m in env.get_wrapper_attr("messages")][:-1]  # up to the last turn
    rendered = tokenizer.apply_chat_template(conversation, tools=info["tools"], tokenize=False)
    assert tokenizer.decode(tokens) == rendered.removesuffix("\n")


class BatchSolverEngine(SolverEngine):
    """:class:`SolverEngine` with the batching solver: every call of a turn in one generation."""

    def __init__(self, tokenizer: Any, spec: EpisodeSpec) -> None:
        from tests.solver_text import BatchSolverText

        self.tokenizer, self.solver, self.texts = tokenizer, BatchSolverText(spec), []


@pytest.mark.parametrize("index", [0, 1])  # H=5, H=1
def test_openrlhf_executor__plays_a_fit_episode_with_several_calls_per_turn_token_exact(
    tokenizer: Any, tmp_path: Path, index: int
) -> None:
    from ace_gym.eval.fit import fit_spec
    from tests.solver_text import played_conversation

    spec = fit_spec(SPECS[index])
    agent_func.write_dataset([spec], tmp_path / "train.jsonl")
    row = json.loads((tmp_path / "train.jsonl").read_text())
    engine = BatchSolverEngine(tokenizer, spec)
    params = SimpleNamespace(max_tokens=None, logprobs=1)
    result = asyncio.run(
        agent_func.AgentExecutor().execute(row["prompt"], row["label"], params, 10**6, tokenizer, engine)
    )
    assert result["reward"] == 1.0 and float(result["scores"]) == 1.0 and not result["truncated"]
    assert max(engine.solver.calls) > 1 and len(engine.texts) <= 5
    tokens, ranges = result["observation_tokens"], result["action_ranges"]
    # one action range (one trained sample turn) per generation, holding all of the turn's calls
    assert [tokenizer.decode(tokens[a:b], skip_special_tokens=True) for a, b in ranges] == engine.texts
    messages, tools = played_conversation(spec, engine.texts)
    assert sum(m["role"] == "tool" for m in messages) == sum(engine.solver.calls[:-1])
    rendered = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False).removesuffix("\n")
    assert tokenizer.decode(tokens) == rendered
    assert list(tokens) == tokenizer.encode(rendered, add_special_tokens=False)


class LossyTokenizer:
    """The tiny tokenizer, except that its decoded text does not encode back to the same ids."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tokenizer, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.tokenizer(*args, **kwargs)

    def decode(self, ids: Any, **kwargs: Any) -> str:
        return self.tokenizer.decode(ids, **kwargs).replace("<tool_response>", "<tool_response >")


def test_agent_instance__a_tokenizer_whose_decode_encode_round_trip_changes_ids_is_refused(tokenizer: Any) -> None:
    instance = agent_func.AgentInstance(LossyTokenizer(tokenizer))
    asyncio.run(instance.reset({"label": SPECS[1].to_json()}))  # the opening has no tool reply: it round-trips
    action = SolverText(SPECS[1]).next_text()
    with pytest.raises(ConfigError, match="re-encoding"):
        asyncio.run(instance.step({"action_text": action}))


class CuttingEngine(BatchSolverEngine):
    """:class:`BatchSolverEngine` that cuts a turn at the ``max_tokens`` it is asked for (finish
    reason "length", no end id), as vLLM does, and keeps what it was asked for."""

    def __init__(self, tokenizer: Any, spec: EpisodeSpec) -> None:
        super().__init__(tokenizer, spec)
        self.asked: list[int] = []

    async def generate(self, token_ids: list[int], sampling_params: Any, **kwargs: Any) -> Any:
        self.asked.append(sampling_params.max_tokens)
        output = await super().generate(token_ids, sampling_params, **kwargs)
        whole = output.outputs[0]
        ids = whole.token_ids[: sampling_params.max_tokens]
        if len(ids) < len(whole.token_ids):
            self.texts[-1] = self.tokenizer.decode(ids, skip_special_tokens=True)
            output.outputs[0] = SimpleNamespace(
                token_ids=ids, text=self.texts[-1], finish_reason="length", logprobs=whole.logprobs[: len(ids)]
            )
        return output


def _cut_run(tokenizer: Any, spec: EpisodeSpec, max_length: int, max_tokens: int | None) -> tuple[dict, Any, Any]:
    """The executor's result for ``spec`` within ``max_length`` (``--rollout.max_new_tokens``:
    ``max_tokens``), its engine and the agent instance."""
    INSTANCES.clear()
    engine = CuttingEngine(tokenizer, spec)
    params = SimpleNamespace(max_tokens=max_tokens, logprobs=1)
    result = asyncio.run(
        agent_func.AgentExecutor().execute(spec.opening(), spec.to_json(), params, max_length, tokenizer, engine)
    )
    (instance,) = INSTANCES
    return result, engine, instance


def test_openrlhf_executor__a_cut_episode_ends_at_max_length_scored_as_its_grid_stands(
    tokenizer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An H=5 FIT episode the batching solver solves in four turns, within a ``max_length`` that
    ends inside its second turn, inside the replies after it, inside its third turn (the
    set_slot calls), inside the replies after that, and not at all: the ids never pass
    ``max_length`` (once a turn's replies reach it, the episode is done there, with no replies after
    its last turn), stay token-exact, and the reward is the score of the episode replayed with
    exactly the turns in them, the grid as it stands when they run out (1.0 once the set_slot turn
    is in); a cut episode is marked truncated in ``extra_logs``."""
    from ace_gym.eval.fit import fit_spec
    from tests.solver_text import replayed_score

    monkeypatch.setattr(agent_func, "AgentInstance", RecordedInstance)
    spec = fit_spec(SPECS[0])
    whole, _, _ = _cut_run(tokenizer, spec, 10**6, None)
    ranges = whole["action_ranges"]
    assert len(ranges) == 4 and whole["reward"] == 1.0
    _, (start_2, end_2), (start_3, end_3), (start_4, _) = ranges
    budgets = [(start_2 + end_2) // 2, (end_2 + start_3) // 2, start_3, (start_3 + end_3) // 2, (end_3 + start_4) // 2]
    for max_length in [*budgets, 10**6]:
        result, engine, instance = _cut_run(tokenizer, spec, max_length, None)
        tokens, ranges = result["observation_tokens"], result["action_ranges"]
        assert len(tokens) == len(result["rollout_log_probs"]) == ranges[-1][1] <= max_length, max_length
        assert tokens == instance.tokens.token_ids[: len(tokens)], max_length
        texts = [tokenizer.decode(tokens[a:b], skip_special_tokens=True) for a, b in ranges]
        assert texts == engine.texts, max_length
        assert result["reward"] == float(result["scores"]) == replayed_score(spec, texts), max_length
        assert float(result["extra_logs"]["truncated"]) == (max_length < 10**6), max_length
    assert result["reward"] == 1.0
    after_set_slot, _, _ = _cut_run(tokenizer, spec, budgets[-1], None)
    assert after_set_slot["reward"] == 1.0  # the grid the trained turns filled, not the 0 of an unfinished step


def test_openrlhf_executor__rollout_max_new_tokens_caps_each_turn_token_exact(
    tokenizer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--rollout.max_new_tokens`` (the ``max_tokens`` OpenRLHF's sampling params arrive with)
    caps every turn, as evaluation caps a turn, though the executor offers each turn all the room
    left; a turn cut there (no end id) keeps OpenRLHF's ids token-exact. A cap that is no positive
    integer is a ConfigError naming it."""
    from ace_gym.eval.fit import fit_spec

    monkeypatch.setattr(agent_func, "AgentInstance", RecordedInstance)
    spec = fit_spec(SPECS[0])
    result, engine, instance = _cut_run(tokenizer, spec, 10**6, 48)
    assert set(engine.asked) == {48} and len(engine.asked) >= 2
    tokens, ranges = result["observation_tokens"], result["action_ranges"]
    assert all(b - a <= 48 for a, b in ranges) and ranges[0][1] - ranges[0][0] == 48
    assert tokens == instance.tokens.token_ids[: len(tokens)]
    assert [tokenizer.decode(tokens[a:b], skip_special_tokens=True) for a, b in ranges] == engine.texts
    with pytest.raises(ConfigError, match="max_new_tokens"):
        _cut_run(tokenizer, spec, 10**6, 0)


@pytest.mark.parametrize("max_tokens", [None, 48])
def test_openrlhf_executor__a_max_length_the_opening_does_not_fit_in_is_a_config_error(
    tokenizer: Any, max_tokens: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenRLHF would cut an opening that leaves less than the first turn's room (the per-turn
    cap, else one id) in ``max_length`` from the left (the system prompt first): one ConfigError
    naming ``data.max_len`` instead; an opening that leaves exactly that room plays."""
    from ace_gym.eval.fit import fit_spec

    monkeypatch.setattr(agent_func, "AgentInstance", RecordedInstance)
    spec = fit_spec(SPECS[1])
    whole, _, _ = _cut_run(tokenizer, spec, 10**6, None)
    opening = whole["action_ranges"][0][0]
    room = max_tokens or 1
    with pytest.raises(ConfigError, match=r"data\.max_len") as refused:
        _cut_run(tokenizer, spec, opening + room - 1, max_tokens)
    assert "\n" not in str(refused.value)
    played, _, _ = _cut_run(tokenizer, spec, opening + room, max_tokens)
    assert played["observation_tokens"][:opening] == whole["observation_tokens"][:opening]


@pytest.mark.parametrize(
    "action",
    [
        "",
        "garbage \x00 \ud800 text",
        "<tool_call>",
        '<tool_call>{"name": "set_slot", "argu',
        "<tool_call>[1]</tool_call>",
        "x" * 100_000,
    ],
)
def test_agent_instance__a_malformed_turn_is_an_observation(tokenizer: Any, action: str) -> None:
    """Garbage, a lone surrogate, half a call, a call that is no object, a huge turn: the episode
    goes on with a corrective message (not done, no exception), whatever the action text holds."""
    instance = agent_func.AgentInstance(tokenizer)
    asyncio.run(instance.reset({"label": SPECS[1].to_json()}))
    result = asyncio.run(instance.step({"action_text": action}))
    assert not result["done"] and result["environment_feedback"]


class YieldingEngine(CuttingEngine):
    """:class:`CuttingEngine` that lets other episodes run while it generates, as vLLM does."""

    async def generate(self, token_ids: list[int], sampling_params: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0)
        return await super().generate(token_ids, sampling_params, **kwargs)


def test_openrlhf_executor__samples_of_one_prompt_share_their_sampling_params_and_each_keeps_the_cap(
    tokenizer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenRLHF plays a prompt's samples at once through one executor and one sampling-params
    object, on which its executor writes each turn's room; every sample's turns are still capped
    at ``--rollout.max_new_tokens`` (48), and the object keeps it."""
    from ace_gym.eval.fit import fit_spec

    monkeypatch.setattr(agent_func, "AgentInstance", RecordedInstance)
    INSTANCES.clear()
    spec = fit_spec(SPECS[0])
    params = SimpleNamespace(max_tokens=48, logprobs=1)
    engines = [YieldingEngine(tokenizer, spec) for _ in range(3)]
    executor = agent_func.AgentExecutor()

    async def samples() -> list[dict[str, Any]]:
        return await asyncio.gather(
            *(executor.execute(spec.opening(), spec.to_json(), params, 10**6, tokenizer, e) for e in engines)
        )

    results = asyncio.run(samples())
    assert [set(engine.asked) for engine in engines] == [{48}] * 3
    assert all(b - a <= 48 for result in results for a, b in result["action_ranges"])
    assert params.max_tokens == 48


def test_openrlhf_executor__concurrent_episodes_each_build_their_instance_with_their_own_settings(
    tokenizer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Episodes played at once through one executor each get an instance built with their own
    ``max_length``, even where OpenRLHF's executor awaits before it builds the instance; the shared
    executor is left as it was built."""
    from openrlhf.utils.agent import MultiTurnAgentExecutor

    from ace_gym.eval.fit import fit_spec

    played = MultiTurnAgentExecutor.execute

    async def awaits_first(self: Any, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0)
        return await played(self, *args, **kwargs)

    monkeypatch.setattr(MultiTurnAgentExecutor, "execute", awaits_first)
    monkeypatch.setattr(agent_func, "AgentInstance", RecordedInstance)
    INSTANCES.clear()
    spec = fit_spec(SPECS[0])
    executor = agent_func.AgentExecutor()
    built = executor.agent_instance_cls
    lengths = [10**6, 10**6 + 1, 10**6 + 2]

    async def samples() -> list[dict[str, Any]]:
        return await asyncio.gather(
            *(
                executor.execute(
                    spec.opening(),
                    spec.to_json(),
                    SimpleNamespace(max_tokens=48, logprobs=1),
                    n,
                    tokenizer,
                    YieldingEngine(tokenizer, spec),
                )
                for n in lengths
            )
        )

    asyncio.run(samples())
    assert sorted(instance.max_length for instance in INSTANCES) == lengths
    assert executor.agent_instance_cls is built
