"""The transformers engine on a tiny random Llama built locally, alone and through the collector."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from ace_gym.agents.base import ChatEngine, TokenChatEngine  # noqa: E402
from ace_gym.agents.llm import make_engine  # noqa: E402
from ace_gym.agents.llm.hf_engine import HFChatEngine  # noqa: E402
from ace_gym.agents.llm.tiny_model import build_tiny_model  # noqa: E402
from ace_gym.envs import AceEnv  # noqa: E402
from ace_gym.errors import ConfigError, EngineUnavailableError  # noqa: E402
from ace_gym.eval import EpisodeSpec, run_episodes  # noqa: E402
from tests.steering import ScriptedTurns, SteeredLlama, fill_then_done  # noqa: E402
from tests.token_records import assert_token_exact  # noqa: E402


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def greedy(tiny_model: Path) -> HFChatEngine:
    return HFChatEngine(tiny_model, max_new_tokens=12, temperature=0)


def _start(domain: str, index: int = 0) -> tuple[list[dict], list[dict]]:
    observation, info = AceEnv(domain).reset(options={"instance_index": index})
    return [{"role": "system", "content": info["system_prompt"]}, {"role": "user", "content": observation}], info[
        "tools"
    ]


def test_hf_engine__is_a_chat_engine(greedy: HFChatEngine) -> None:
    assert isinstance(greedy, ChatEngine) and isinstance(greedy, TokenChatEngine)


@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_hf_engine__logprobs_are_the_generated_tokens_log_probabilities_at_the_temperature(
    greedy: HFChatEngine, temperature: float
) -> None:
    engine = HFChatEngine(greedy.model, greedy.tokenizer, max_new_tokens=6, temperature=temperature, seed=3)
    conversation, tools = _start("meal")
    (completion,) = engine.generate([conversation], [tools])
    ids = completion.completion_token_ids
    assert completion.logprobs is not None and len(completion.logprobs) == len(ids)
    sequence = torch.tensor([completion.prompt_token_ids + ids])
    with torch.no_grad():
        logits = engine.model(sequence).logits[0, len(completion.prompt_token_ids) - 1 : -1]
    expected = torch.log_softmax(logits / (temperature or 1.0), dim=-1).gather(1, torch.tensor([ids]).T).squeeze(1)
    assert completion.logprobs == pytest.approx(expected.tolist(), abs=1e-4)
    quiet = HFChatEngine(greedy.model, greedy.tokenizer, max_new_tokens=2, logprobs=False)
    assert quiet.generate([conversation], [tools])[0].logprobs is None


def test_hf_engine__generate_ids_equals_generate_on_the_rendered_prompt(greedy: HFChatEngine) -> None:
    conversation, tools = _start("pc_build")
    (from_messages,) = greedy.generate([conversation], [tools])
    (from_ids,) = greedy.generate_ids([from_messages.prompt_token_ids])
    assert from_ids == from_messages


def test_hf_engine__batched_left_padded_generation_equals_one_by_one(greedy: HFChatEngine) -> None:
    conversations, tools = zip(*(_start("course"), _start("meal"), _start("travel", 3)), strict=True)
    conversations[1][1]["content"] = "a much shorter first message"  # forces padding
    batch = greedy.generate(list(conversations), list(tools))
    alone = [greedy.generate([c], [t])[0] for c, t in zip(conversations, tools, strict=True)]
    assert len({c.prompt_tokens for c in batch}) == 3
    assert [c.completion_token_ids for c in batch] == [c.completion_token_ids for c in alone]
    assert [c.text for c in batch] == [c.text for c in alone]


def test_hf_engine__records_token_usage_and_ids(greedy: HFChatEngine) -> None:
    conversation, tools = _start("shopping")
    (completion,) = greedy.generate([conversation], [tools])
    expected_prompt = greedy.tokenizer.apply_chat_template(
        conversation, tools=tools, add_generation_prompt=True, tokenize=False
    )
    assert greedy.tokenizer.decode(completion.prompt_token_ids) == expected_prompt
    assert completion.prompt_tokens == len(completion.prompt_token_ids)
    assert completion.completion_tokens == len(completion.completion_token_ids) <= 12
    eos = greedy.tokenizer.eos_token_id
    if completion.finish_reason == "stop":
        assert completion.completion_token_ids[-1] == eos
    else:
        assert completion.finish_reason == "length" and completion.completion_tokens == 12
    assert eos not in completion.completion_token_ids[:-1]


def test_hf_engine__sampling_is_reproducible_from_the_seed_and_leaves_global_rng_alone(tiny_model: Path) -> None:
    conversation, tools = _start("workforce")
    state = torch.random.get_rng_state()
    runs = [
        [
            c.completion_token_ids
            for c in HFChatEngine(tiny_model, max_new_tokens=8, seed=seed).generate([conversation] * 2, [tools] * 2)
        ]
        for seed in (7, 7, 8)
    ]
    assert torch.equal(torch.random.get_rng_state(), state)
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]


def test_hf_engine__generates_with_a_live_model_and_restores_its_training_mode(tiny_model: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    model.train()
    engine = HFChatEngine(model, AutoTokenizer.from_pretrained(tiny_model), max_new_tokens=4, temperature=0)
    conversation, tools = _start("pc_build")
    (completion,) = engine.generate([conversation], [tools])
    assert engine.model is model and model.training
    assert 1 <= completion.completion_tokens <= 4


def test_hf_engine__a_max_new_tokens_over_the_context_raises_a_config_error_naming_it_the_context_and_the_model(
    tiny_model: Path,
) -> None:
    """Issue 29: it used to return empty turns that scored 0."""
    with pytest.raises(ConfigError) as raised:
        HFChatEngine(str(tiny_model), max_new_tokens=16384)  # the tiny model's context is 16384 positions
    assert (raised.value.field, raised.value.value) == ("max_new_tokens", 16384)
    assert "16384 tokens" in str(raised.value) and str(tiny_model) in str(raised.value)


def test_hf_engine__a_prompt_that_leaves_less_than_max_new_tokens_raises_before_generating(
    tiny_model: Path,
) -> None:
    engine = HFChatEngine(tiny_model, max_new_tokens=4, temperature=0, max_context=1000)
    long_conversation, long_tools = _start("course")
    short = [{"role": "user", "content": "hi"}]
    with pytest.raises(ConfigError) as raised:
        engine.generate([long_conversation, short], [long_tools, []])
    assert (raised.value.field, raised.value.value) == ("max_new_tokens", 4)
    assert "context of 1000 tokens" in str(raised.value) and str(tiny_model) in str(raised.value)
    (fine,) = engine.generate([short], [[]])
    assert fine.completion_tokens >= 1


def test_hf_engine__episodes_over_the_context_raise_and_yield_no_record(tiny_model: Path) -> None:
    """As a dead endpoint does: the error propagates and no episode in flight is scored."""
    engine = HFChatEngine(tiny_model, max_new_tokens=8, temperature=0, max_context=1000)
    specs = [EpisodeSpec.of(domain, instance_index=0, seed=1, max_turns=3) for domain in ("course", "meal")]
    records: list[dict] = []
    with pytest.raises(ConfigError, match="max_new_tokens=8"):
        records.extend(run_episodes(specs, engine, batch_size=2))
    assert records == []


def test_hf_engine__episodes_through_the_adapter_and_collector_are_well_formed(tiny_model: Path) -> None:
    engine = make_engine(f"hf:{tiny_model}", max_new_tokens=12, seed=3)
    specs = [
        EpisodeSpec.of(domain, instance_index=i, seed=i, max_turns=2)
        for i, domain in enumerate(("course", "meal", "travel"))
    ]
    records = list(run_episodes(specs, engine, batch_size=3))
    assert sorted(r["domain"] for r in records) == ["course", "meal", "travel"]
    for record in records:
        assert record["score"] == 0  # an untrained model cannot solve the task
        assert record["truncated"] and not record["terminated"]
        assert record["usage"]["turns"] == len(record["turns"]) == 2
        assert record["usage"]["prompt_tokens"] == sum(t["prompt_tokens"] for t in record["turns"]) > 0
        assert record["usage"]["completion_tokens"] == sum(len(t["completion_token_ids"]) for t in record["turns"]) > 0
        assistants = [i for i, m in enumerate(record["messages"]) if m["role"] == "assistant"]
        assert len(assistants) == 2 and record["messages"][:2][0]["role"] == "system"
        for turn, position in zip(record["turns"], assistants, strict=True):
            info = turn["info"]
            no_call = not info["calls"] and not info["skipped_calls"]
            if no_call or info["parse_errors"]:  # the adapter must have answered with a correction
                after = record["messages"][position + 1 :]
                replies = after[: next((k for k, m in enumerate(after) if m["role"] == "assistant"), len(after))]
                assert replies[-1]["role"] == "user" and "tool call" in replies[-1]["content"]


def test_hf_engine__records_are_token_exact_and_decode_to_their_messages(tiny_model: Path) -> None:
    """Sampled noise: every turn is unreadable and gets a corrective message."""
    engine = HFChatEngine(tiny_model, max_new_tokens=10, temperature=1.0, seed=5)
    specs = [EpisodeSpec.of(domain, instance_index=1, seed=2, max_turns=3) for domain in ("course", "travel")]
    records = list(run_episodes(specs, engine, batch_size=2))
    for record in records:
        assert len(record["turns"]) == 3
        assert_token_exact(record, engine.tokenizer)


def test_hf_engine__tool_calling_episodes_are_recorded_token_exact(tiny_model: Path) -> None:
    """The model steered to call tools (set a slot, then done): tool replies between the turns."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    model = SteeredLlama.from_pretrained(tiny_model)
    specs = [EpisodeSpec.of(domain, instance_index=0, seed=3, max_turns=4) for domain in ("meal", "workforce")]
    model.steering = ScriptedTurns(tokenizer, fill_then_done(specs))
    engine = HFChatEngine(model, tokenizer, max_new_tokens=64, temperature=1.0, seed=0)
    for record in run_episodes(specs, engine, batch_size=2):
        assert record["terminated"] and len(record["turns"]) == 2
        assert [m["role"] for m in record["messages"]] == ["system", "user", "assistant", "tool", "assistant", "tool"]
        assert_token_exact(record, tokenizer)


def test_hf_engine__under_a_context_policy_each_turn_is_a_token_exact_sample_of_what_the_model_saw(
    tiny_model: Path,
) -> None:
    """Issue 29: with earlier turns left out, each turn's prompt ids are the chat template's
    rendering of exactly the messages the model was shown (opening, grid state, last turn)."""
    from transformers import AutoTokenizer

    from ace_gym.chat_template import ChatTokens
    from ace_gym.runs.loop import turn_samples
    from tests.steering import hermes_call

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    model = SteeredLlama.from_pretrained(tiny_model)
    model.steering = ScriptedTurns(tokenizer, lambda conversation: [hermes_call("get_current_grid_state")])
    engine = HFChatEngine(model, tokenizer, max_new_tokens=64, temperature=1.0, seed=0)
    spec = EpisodeSpec.of("meal", instance_index=0, seed=3, max_turns=4, context={"last_turns": 1})
    (record,) = run_episodes([spec], engine)
    samples = turn_samples(record)
    assert len(samples) == 4 and record["tokens"] is None  # per-turn samples, no one growing sequence
    assert [len(s["messages"]) for s in samples] == [2, 4, 5, 5]  # turns 3 and 4: one turn left out
    for turn, sample in zip(record["turns"], samples, strict=True):
        rendered = ChatTokens(tokenizer, record["tools"]).reset(sample["messages"])
        assert sample["prompt_ids"] == rendered == turn["prompt_token_ids"]
        assert tokenizer.decode(sample["completion_ids"], skip_special_tokens=True).strip() == hermes_call(
            "get_current_grid_state"
        )
    shown = tokenizer.decode(samples[3]["prompt_ids"])
    assert "not shown" in shown and shown.count("<|im_start|>assistant") == 2  # the last turn and the open one


def test_hf_engine__an_episode_the_template_stops_rendering_goes_on_without_tokens(tiny_model: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    tokenizer.chat_template = (
        "{% if messages | selectattr('role', 'equalto', 'tool') | list %}{{ raise_exception('no tools here') }}"
        "{% endif %}" + tokenizer.chat_template
    )
    model = SteeredLlama.from_pretrained(tiny_model)
    specs = [EpisodeSpec.of("meal", instance_index=0, seed=3, max_turns=3)]
    model.steering = ScriptedTurns(tokenizer, fill_then_done(specs))
    (record,) = run_episodes(specs, HFChatEngine(model, tokenizer, max_new_tokens=64, seed=0))
    assert record["tokens"] is None  # the second turn could not be rendered: no token trajectory
    assert len(record["turns"]) == 3 and record["turns"][1]["finish_reason"] == "error"


def test_hf_engine__a_conversation_the_chat_template_refuses_fails_alone(tiny_model: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    tokenizer.chat_template = (
        "{% if messages[-1].content == 'boom' %}{{ raise_exception('one tool call per turn only') }}{% endif %}"
        + tokenizer.chat_template
    )
    engine = HFChatEngine(str(tiny_model), tokenizer, max_new_tokens=3, temperature=0)
    refused, fine = engine.generate(
        [[{"role": "user", "content": "boom"}], [{"role": "user", "content": "hi"}]], [[], []]
    )
    assert refused.finish_reason == "error" and "one tool call per turn only" in refused.text
    assert refused.completion_tokens == 0
    assert fine.finish_reason in ("stop", "length") and fine.completion_tokens >= 1


@pytest.mark.parametrize("made", [False, True], ids=["missing", "empty-folder"])
def test_hf_engine__a_model_path_that_does_not_load_raises_unavailable_naming_it(tmp_path: Path, made: bool) -> None:
    path = tmp_path / "model"
    if made:
        path.mkdir()
    with pytest.raises(EngineUnavailableError) as raised:
        make_engine(f"hf:{path}")
    assert str(raised.value).startswith(f"model {path}: cannot load") and "\n" not in str(raised.value)


def test_hf_engine__a_tokenizer_path_that_does_not_load_raises_unavailable_naming_it(
    tiny_model: Path, tmp_path: Path
) -> None:
    with pytest.raises(EngineUnavailableError, match=r"^tokenizer .*no-tokenizer: cannot load"):
        HFChatEngine(str(tiny_model), tmp_path / "no-tokenizer")


@pytest.mark.parametrize("dtype", ["int8", "float33", 5])
def test_hf_engine__a_dtype_that_is_no_float_dtype_raises_a_config_error_naming_it(
    tiny_model: Path, dtype: object
) -> None:
    with pytest.raises(ConfigError) as raised:
        HFChatEngine(str(tiny_model), dtype=dtype)
    assert raised.value.field == "dtype" and raised.value.value == dtype


def test_hf_engine__takes_a_float_dtype_by_name_or_as_a_torch_dtype(tiny_model: Path) -> None:
    assert HFChatEngine(str(tiny_model), dtype="bfloat16").model.dtype == torch.bfloat16
    assert HFChatEngine(str(tiny_model), dtype=torch.float32).model.dtype == torch.float32


def test_hf_engine__samples_with_its_own_settings_never_the_model_generation_config(tiny_model: Path) -> None:
    """A model whose generation config sets sampling defaults (top-k 3, a repetition penalty)
    samples from its whole distribution at the engine's settings (no top-k by default: 256 first
    tokens of the untrained model, nearly uniform over 2,048 ids, hold far more than 50 distinct
    ids), and the engine's ``top_k`` applies when given; the model's config is left as it was."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    model.generation_config.top_k = 3
    model.generation_config.repetition_penalty = 5.0
    prompts = [tokenizer.encode("Fill the grid.")] * 256

    def first_tokens(**sampling: object) -> set[int]:
        engine = HFChatEngine(model, tokenizer, max_new_tokens=1, batch_size=64, logprobs=False, **sampling)
        return {completion.completion_token_ids[0] for completion in engine.generate_ids(prompts)}

    assert len(first_tokens()) > 100 and len(first_tokens(top_k=50)) <= 50
    assert (model.generation_config.top_k, model.generation_config.repetition_penalty) == (3, 5.0)
    with pytest.raises(ConfigError, match="max_new_tokens"):
        HFChatEngine(model, tokenizer, generation_kwargs={"max_new_tokens": 4})


@pytest.mark.parametrize(
    "kwargs",
    [
        {"top_k": 5},
        {"temperature": 0.5},
        {"do_sample": False},
        {"eos_token_id": 3},
        {"max_length": 3},
        {"num_return_sequences": 2},
        {"num_beams": 2},
        {"stop_strings": ["x"]},
        {"stop": ["x"]},
        {"n": 2},
        {"kwargs": {"top_k": 5}},
        {"transformers_version": "4.0"},
        {"max_time": 0.0},
        {"dola_layers": "high"},
        {"custom_generate": "transformers-community/dola"},
        {"token_healing": True},
    ],
)
def test_hf_engine__refuses_generation_kwargs_it_cannot_pass_on_as_given_when_built(
    tiny_model: Path, kwargs: dict[str, object]
) -> None:
    """A ``generation_kwargs`` entry that is one of the engine's own settings (``generate`` would
    get it twice, or ignore it for ``max_new_tokens``), asks for more sequences, a beam search or
    other stops (completions would no longer be one sampled sequence per prompt, rows mismatched),
    or is no ``generate`` setting (``generate``'s catch-all ``kwargs``, which it ignores), is one
    ConfigError naming it, at construction; so is a clock (``max_time``: a turn cut after 0 s
    ends after one id, "length"), another decoding loop (DoLa, ``custom_generate``) or a
    rewritten prompt (``token_healing``), which ran or failed only at the first generation."""
    (name,) = kwargs
    with pytest.raises(ConfigError, match=name) as refused:
        HFChatEngine(tiny_model, max_new_tokens=4, generation_kwargs=kwargs)
    assert "\n" not in str(refused.value)


def test_hf_engine__passes_generate_settings_of_its_own_kind_on_unchanged(tiny_model: Path) -> None:
    """A ``generation_kwargs`` entry ``generate`` takes and the engine leaves alone reaches it:
    with ids below 1,000 suppressed, none of 128 sampled ids of the untrained model (nearly uniform
    over 2,048 ids) is below 1,000; without, about half are."""

    def drawn(**generation_kwargs: object) -> list[int]:
        engine = HFChatEngine(tiny_model, max_new_tokens=4, batch_size=32, generation_kwargs=generation_kwargs)
        return [token for c in engine.generate_ids([[1, 2, 3]] * 32) for token in c.completion_token_ids]

    assert min(drawn(suppress_tokens=list(range(1000)))) >= 1000 and min(drawn()) < 1000


def test_hf_engine__a_response_budget_cuts_the_turn_that_reaches_it_and_ends_the_episode_there(
    tiny_model: Path,
) -> None:
    """Under ``TokenEngineActor(response_budget=...)`` a turn is cut at the room left (before the
    env reads it) and the episode ends there, truncated and scored as its grid stands: every
    generated id of the record lies within the budget, and the whole episode is its turns."""
    from ace_gym.runs.loop import TokenEngineActor

    spec = EpisodeSpec.of("course", instance_index=0, seed=1, max_turns=3)  # the budget ends it within 2 turns

    def played(budget: int) -> dict:
        engine = HFChatEngine(tiny_model, max_new_tokens=30, temperature=1.0, seed=2)  # the same draws each time
        (record,) = run_episodes([spec], TokenEngineActor(engine, response_budget=budget))
        return record

    second_turn = played(10**6)["tokens"]["turn_starts"][1]
    record = played(second_turn + 10)  # the second turn gets 10 of its 30 ids
    tokens = record["tokens"]
    last = tokens["turn_starts"][-1] + len(record["turns"][-1]["completion_token_ids"])
    assert len(record["turns"]) == 2 and last == second_turn + 10
    assert record["turns"][-1]["finish_reason"] == "length" and len(record["turns"][-1]["completion_token_ids"]) == 10
    assert record["truncated"] and not record["terminated"] and record["score"] == 0.0
    engine = HFChatEngine(tiny_model, max_new_tokens=30)
    with pytest.raises(ConfigError, match="response_budget"):
        TokenEngineActor(engine, response_budget=0)
