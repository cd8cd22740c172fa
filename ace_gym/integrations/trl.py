"""TRL's multi-turn training paths on ACE envs (``pip install ".[train]"``: trl >= 1.8).

* :func:`environment_factory` -> ``GRPOTrainer(environment_factory=...)``: one class per domain
  whose public methods are the domain's 11 tools (signatures and Google docstrings generated from
  ace-gym's tool table, so the schemas TRL renders are ``info["tools"]``); TRL parses the calls
  with the model's chat template and runs them; ``get_reward`` is the episode score. With
  :func:`train_dataset` for the rows (``prompt``, ``environment`` and the instance columns that
  ``reset`` reads).
* :func:`rollout_func` -> ``GRPOTrainer(rollout_func=...)``: ace-gym's own collector plays the
  episodes (its multi-format parser and corrective messages included) against TRL's generation,
  token-exact, every assistant turn trained and every env token masked.
* :class:`AceMetrics`: a reward function that scores nothing and logs ``ace/...`` metrics.
* A curriculum (docs/curriculum.md): ``environment_factory(curriculum=state)`` plays procedural
  instances at the level ``state`` chooses when each row is reset, :func:`curriculum_dataset`
  gives the rows, and :class:`CurriculumOutcomes` (a reward function that scores nothing)
  reports each batch's outcomes to ``state``.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from ace_gym.agents.base import Completion
from ace_gym.agents.llm.hf_engine import HFChatEngine, checked_generation_kwargs
from ace_gym.agents.llm.messages import completion_without_generation, render_prompts
from ace_gym.curriculum import CurriculumState
from ace_gym.domains import DOMAIN_NAMES, get_domain
from ace_gym.envs import AceEnv
from ace_gym.errors import ConfigError, choice, integer, optional_integer
from ace_gym.eval import EpisodeSpec, run_episodes
from ace_gym.eval.fit import tell_free_env_kwargs
from ace_gym.integrations.rewards import REWARDS, partial_score
from ace_gym.presets import PROCEDURAL_PRESETS
from ace_gym.runs.loop import TokenEngineActor
from ace_gym.stacks import wrap
from ace_gym.stats import group_key
from ace_gym.tools import Tool, toolset

logger = logging.getLogger(__name__)

RETURNS = 'The tool\'s reply: a JSON object with "status", "messages" and "data".'
"""The ``Returns:`` section of every generated tool method."""
INSTANCE_COLUMNS = ("dataset", "instance_index", "instance_id", "seed")
"""The columns of :func:`train_dataset` that ``reset`` reads (with ``environment``, the domain)."""
GRID_ARGUMENTS = ("rows", "cols", "candidates_per_slot", "time_budget")
"""The :class:`~ace_gym.envs.procedural.GeneratorSource` arguments a curriculum's ``grid`` may set
(the levels set ``hidden_slots`` and ``decoy_budget``)."""
DEFAULT_GRID: dict[str, Any] = {
    key: PROCEDURAL_PRESETS["procedural"][key] for key in ("rows", "cols", "candidates_per_slot")
}
"""The grid of a curriculum's instances unless ``grid`` says otherwise: the 5x7 procedural preset's."""


class AceToolEnvironment:
    """One ACE episode at a time for TRL: the base of the per-domain classes of
    :func:`environment_factory` (``domain``, ``dataset``, ``env_kwargs`` and ``tool_failure_rate``
    are class attributes there; the public methods are the tools).

    ``reset(**row)`` starts the episode of a :func:`train_dataset` row (``instance_index`` or
    ``instance_id``, and ``seed``, which also seeds failure injection). It returns None when the
    row has a ``prompt`` (the opening conversation is already there; never under a curriculum),
    else the system prompt and the first user message as one text (TRL appends it to the row's
    user message). Each tool call
    is one step of ``ToolFailureInjection(AceEnv(domain, dataset, **env_kwargs), rate)``, so
    budgets (``max_steps``, query and check budgets) and injected failures apply; a call after the
    episode ended gets the env's failed envelope. ``get_reward()`` is the score of the finished
    episode, or of the grid as it stands when the model stopped calling tools (as a turn limit
    scores it); with ``reward="partial"``, the partial score of that grid
    (:func:`~ace_gym.integrations.rewards.partial_score`). TRL ends its tool loop where
    ``max_completion_length`` ends the completion and runs only the calls parsed from the ids it
    keeps, so the reward is earned by the ids TRL trains on. ``episode`` summarises the episode
    for :class:`AceMetrics` (``score`` is the 0/1 score under either reward).

    With a ``curriculum`` (a :class:`~ace_gym.curriculum.CurriculumState` shared by every
    environment of the factory) the instances are generated on ``grid`` (GeneratorSource
    arguments): ``reset`` plays the level the curriculum holds for the domain at that moment, the
    row's ``seed`` drawing the instance, and ``episode`` carries ``curriculum_level``.
    """

    domain: ClassVar[str]
    dataset: ClassVar[str]
    env_kwargs: ClassVar[Mapping[str, Any]]
    tool_failure_rate: ClassVar[float]
    reward: ClassVar[str] = "score"
    curriculum: ClassVar[CurriculumState | None] = None
    grid: ClassVar[Mapping[str, Any]] = DEFAULT_GRID

    def __init__(self) -> None:
        core = _core_env(self.domain, self.dataset, self.env_kwargs, self.curriculum, self.grid)
        self._core = core
        self._env = wrap(core, _wrappers(self.tool_failure_rate))
        self._score: float | None = None
        self._episode: dict[str, Any] = {}

    def reset(self, **row: Any) -> str | None:
        if row.get("dataset", self.dataset) != self.dataset:
            raise ConfigError("dataset", row["dataset"], f"this environment plays {self.dataset!r}")
        options: dict[str, Any] = {
            key: row[key] for key in ("instance_id", "instance_index") if row.get(key) is not None
        }
        if self.curriculum is not None:
            position = self.curriculum.position(self.domain)
            options.update(self.curriculum.levels[position]._asdict())
        seed = row.get("seed")
        observation, info = self._env.reset(seed=None if seed is None else int(seed), options=options)
        self._score = None
        self._episode = {
            "domain": self.domain,
            "hidden_slots": info["hidden_slots"],
            "decoy_budget": info["decoy_budget"],
            "group": group_key(
                {"dataset": self.dataset, "domain": self.domain, "instance_id": info["instance_id"], "seed": seed}
            ),
            "tool_calls": 0,
            "tool_failure_rate": self.tool_failure_rate,
            "injected_failures": 0,
            "recovered_failures": 0,
        }
        if self.curriculum is not None:
            self._episode["curriculum_level"] = position
        opened = "prompt" in row and self.curriculum is None  # a curriculum's rows cannot know their instance
        return None if opened else f"{info['system_prompt']}\n\n{observation}"

    def get_reward(self) -> float:
        if self.reward == "partial":
            return partial_score(self._core.compiled, self._core.grid)
        return self._episode_score()

    def _episode_score(self) -> float:
        return self._core.score().score if self._score is None else self._score

    @property
    def episode(self) -> dict[str, Any]:
        """The current episode for :func:`~ace_gym.integrations.trainer_callback.summary_metrics`:
        ``domain``, ``hidden_slots``, ``decoy_budget`` (the cell whose mean ``ace/train/score``
        averages), ``group`` (same dataset, instance and seed), ``score``, ``finished`` (by
        ``done`` or a budget), ``tool_calls``, ``tool_failure_rate``, ``injected_failures``,
        ``recovered_failures`` (:mod:`ace_gym.eval.recovery`). Empty before the first reset, so
        that inspecting a fresh instance never raises (TRL 1.8 to 1.14 list an instance's methods
        with ``inspect.getmembers``, which reads every property)."""
        if not self._episode:
            return {}
        return {**self._episode, "score": self._episode_score(), "finished": self._score is not None}

    def _call(self, name: str, arguments: dict[str, Any] | list[Any]) -> str:
        observation, _, terminated, truncated, info = self._env.step({"name": name, "arguments": arguments})
        self._episode["tool_calls"] += 1
        for key in ("injected_failures", "recovered_failures"):
            self._episode[key] = info.get(key, self._episode[key])
        if (terminated or truncated) and "score" in info and self._score is None:
            self._score = float(info["score"])
        return str(observation)


def _wrappers(tool_failure_rate: float, *, always: bool = False) -> list[tuple[str, dict[str, Any]]]:
    """The registry's wrappers (:mod:`ace_gym.stacks`) around an :class:`AceToolEnvironment`'s env:
    failure injection when the rate is > 0 (``always``: also at 0, to validate the rate)."""
    return [("failure_injection", {"rate": tool_failure_rate})] if always or tool_failure_rate > 0 else []


def _core_env(
    domain: str,
    dataset: str,
    env_kwargs: Mapping[str, Any],
    curriculum: CurriculumState | None,
    grid: Mapping[str, Any],
) -> AceEnv:
    """The env an :class:`AceToolEnvironment` plays: the dataset's, or with a curriculum a
    generator of every level of its ladder on ``grid`` (ConfigError for a level the grid cannot hold)."""
    if curriculum is None:
        return AceEnv(domain, dataset, **dict(env_kwargs))
    from ace_gym.envs.procedural import GeneratorSource

    for key in grid:
        if key not in GRID_ARGUMENTS:
            raise ConfigError("grid", dict(grid), f"{key!r} is no grid argument; use {list(GRID_ARGUMENTS)}")
    levels = curriculum.levels
    source = GeneratorSource(
        domain,
        **grid,
        hidden_slots=[level.hidden_slots for level in levels],
        decoy_budget=[level.decoy_budget for level in levels],
    )
    return AceEnv(domain, source=source, **dict(env_kwargs))


def tool_method(tool: Tool) -> Callable[..., str]:
    """A method that calls ``tool`` on the environment, with the tool's name, parameters, type
    hints and a Google docstring built from its schema (what ``transformers.get_json_schema``
    reads). It takes any arguments, so a call with missing or extra ones, one named ``self``
    included, reaches the env, which answers with an error envelope rather than an exception;
    positional values are passed on as a list, which the env refuses (arguments must be an object)."""
    function = tool.schema["function"]
    properties = function["parameters"]["properties"]

    def method(environment: AceToolEnvironment, /, *positional: Any, **arguments: Any) -> str:
        return environment._call(tool.name, list(positional) if positional else arguments)

    hints = inspect.get_annotations(tool.function, eval_str=True)
    original = inspect.signature(tool.function).parameters
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)]
    parameters += [original[name].replace(kind=inspect.Parameter.KEYWORD_ONLY) for name in tool.parameters]
    lines = [function["description"]]
    if tool.parameters:
        lines += ["", "Args:"]
        for name in tool.parameters:
            choices = properties[name].get("enum")
            suffix = f" (choices: {json.dumps(choices)})" if choices else ""
            lines.append(f"    {name}: {properties[name]['description']}{suffix}")
    lines += ["", "Returns:", f"    {RETURNS}"]
    method.__name__ = method.__qualname__ = tool.name
    method.__doc__ = "\n".join(lines)
    method.__annotations__ = {name: hints[name] for name in tool.parameters}
    method.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    return method


def environment_class(
    domain: str,
    *,
    dataset: str = "5x5",
    env_kwargs: Mapping[str, Any] | None = None,
    tool_failure_rate: float = 0.0,
    curriculum: CurriculumState | None = None,
    grid: Mapping[str, Any] | None = None,
    reward: str = "score",
) -> type[AceToolEnvironment]:
    """The :class:`AceToolEnvironment` subclass of ``domain`` with one method per tool.

    Arguments are checked here (ConfigError): the domain and dataset exist, ``env_kwargs`` are
    :class:`~ace_gym.envs.AceEnv` keyword arguments (on the published 5x5 data ``item_names``
    defaults to ``"renumbered"``: its names give the truth away, docs/training.md), the failure
    rate is a probability; with a
    ``curriculum``, ``grid`` (:data:`GRID_ARGUMENTS`, default :data:`DEFAULT_GRID`) holds every
    level of its ladder; ``reward`` is one of :data:`~ace_gym.integrations.rewards.REWARDS`.
    """
    spec = get_domain(domain)
    reward = choice("reward", reward, REWARDS)
    # never train on the published names (the truth has its cell's smallest name number)
    kwargs = dict(env_kwargs or {}) if curriculum is not None else tell_free_env_kwargs(env_kwargs or {}, dataset)
    grid = dict(DEFAULT_GRID if grid is None else grid)
    wrap(
        _core_env(domain, dataset, kwargs, curriculum, grid), _wrappers(tool_failure_rate, always=True)
    )  # validates once
    attributes: dict[str, Any] = {
        "domain": domain,
        "dataset": dataset,
        "env_kwargs": kwargs,
        "tool_failure_rate": float(tool_failure_rate),
        "reward": reward,
        "curriculum": curriculum,
        "grid": grid,
        "__doc__": f"ACE {domain} for TRL's environment_factory (see AceToolEnvironment).",
        "__module__": __name__,
    }
    attributes.update({tool.name: tool_method(tool) for tool in toolset(spec).tools.values()})
    return type(f"Ace{domain.title().replace('_', '')}Environment", (AceToolEnvironment,), attributes)


def environment_factory(
    domains: Iterable[str] = DOMAIN_NAMES,
    *,
    dataset: str = "5x5",
    env_kwargs: Mapping[str, Any] | None = None,
    tool_failure_rate: float = 0.0,
    curriculum: CurriculumState | None = None,
    grid: Mapping[str, Any] | None = None,
    reward: str = "score",
) -> dict[str, type[AceToolEnvironment]]:
    """``{domain: environment class}`` for ``GRPOTrainer(environment_factory=...)``: each row's
    ``environment`` column (see :func:`train_dataset`, :func:`curriculum_dataset`) picks the
    class, and only that domain's tools are shown to the model. The settings apply to every
    domain (see :func:`environment_class`); a ``curriculum`` is shared by all of them."""
    return {
        domain: environment_class(
            domain,
            dataset=dataset,
            env_kwargs=env_kwargs,
            tool_failure_rate=tool_failure_rate,
            curriculum=curriculum,
            grid=grid,
            reward=reward,
        )
        for domain in domains
    }


def train_dataset(specs: Sequence[EpisodeSpec]) -> Any:
    """A ``datasets.Dataset`` with one row per spec: ``prompt`` (the opening ``[system, user]``
    messages, exactly as :class:`~ace_gym.wrappers.ChatAdapter` starts the episode),
    ``environment`` (the domain) and :data:`INSTANCE_COLUMNS`. Every spec is played with the
    settings of the factory or rollout function it is used with; the spec's own ``env_kwargs`` and
    failure rate only shape the prompt (the budgets the system prompt states)."""
    from datasets import Dataset

    rows: dict[str, list[Any]] = {"prompt": [], "environment": [], **{column: [] for column in INSTANCE_COLUMNS}}
    for spec in specs:
        rows["prompt"].append(spec.opening())
        rows["environment"].append(spec.domain)
        for column in INSTANCE_COLUMNS:
            rows[column].append(getattr(spec, column))
    return Dataset.from_dict(rows)


def curriculum_dataset(domains: Sequence[str], size: int, *, seed: int = 0) -> Any:
    """A ``datasets.Dataset`` of ``size`` rows for a curriculum's ``environment_factory``:
    ``environment`` (the domains in turn), ``seed`` (row i's instance seed, from ``(seed, i)``) and
    ``prompt``, an empty user message that ``reset`` fills with the opening of the instance it
    generates (the level is chosen when the row is reset, not here)."""
    from datasets import Dataset

    for domain in domains:
        get_domain(domain)
    count = integer("size", size, minimum=1)
    names = list(domains) or list(DOMAIN_NAMES)
    return Dataset.from_dict(
        {
            "prompt": [[{"role": "user", "content": ""}]] * count,
            "environment": [names[i % len(names)] for i in range(count)],
            "seed": [int(np.random.SeedSequence([seed, i]).generate_state(1)[0]) for i in range(count)],
        }
    )


class CurriculumOutcomes:
    """A TRL reward function that scores nothing (None for every completion) and reports each
    rollout's outcome to ``curriculum``: the environment's episode, at the level it was reset
    with, succeeds when its reward is 1.0. Pass it with ``environment_factory(curriculum=...)``;
    TRL calls it once per batch after every rollout ended, so the next batch's resets see the
    moved state, and members of a GRPO group (reset together) share their level and instance."""

    __name__ = "ace_curriculum"  # TRL names reward columns after this

    def __init__(self, curriculum: CurriculumState) -> None:
        self.curriculum = curriculum

    def __call__(
        self, prompts: Sequence[Any], environments: Sequence[AceToolEnvironment] | None = None, **_: Any
    ) -> list[float | None]:
        for environment in environments or ():
            episode = environment.episode
            self.curriculum.report(episode["domain"], episode["curriculum_level"], episode["score"] >= 1.0)
        return [None] * len(prompts)


ROLLOUT_TRL = (">=1.16", "<1.17")
"""The TRL versions :func:`rollout_func` is tested with (its rollout hook is experimental and the
vLLM generation object it drives is not public API). The parts it relies on read the same from
1.8 on; another version gets a warning, and :func:`episode_score` checks on every batch that TRL
took ``env_mask`` (the env's tokens masked out of the loss) rather than passing it on."""
TRAINER_ATTRIBUTES = ("args", "processing_class", "model", "accelerator", "state", "vllm_generation")
"""Everything :class:`TrainerEngine` reads from the trainer: the config (``args``, a
``GRPOConfig``: every sampling setting), the ``transformers.Trainer`` attributes, and TRL's vLLM
generation object ``vllm_generation`` (with ``use_vllm=True`` only), which :data:`ROLLOUT_TRL`
vouches for."""
ROLLOUT_KWARGS = ("max_new_tokens", "max_tokens", "n", "best_of", "stop", "stop_token_ids", "ignore_eos")
"""``generation_kwargs`` entries :class:`TrainerEngine` refuses on vLLM and transformers alike: the
rollout sets the length of each turn (``max_turn_tokens``), plays one generation per episode, and
ends a turn at the model's end ids only (a turn ending on any other stop would read as cut)."""


class TrainerEngine:
    """TRL's own generation as a :class:`~ace_gym.agents.base.TokenChatEngine` for ace-gym's
    collector: the trainer's vLLM (server or colocated, ``trainer.vllm_generation``) when
    ``args.use_vllm``, else the model being trained through transformers' ``generate`` (unwrapped
    by the trainer's accelerator; use vLLM with sharded models), with the sampling settings of
    ``trainer.args`` exactly (``temperature``, ``top_p``, ``top_k`` with 0 or None for none,
    ``min_p``, ``repetition_penalty``, ``generation_kwargs``; no default of the model's or of
    transformers' applies: :class:`~ace_gym.agents.llm.hf_engine.HFChatEngine`) and at most
    ``max_turn_tokens`` new tokens a turn (default ``args.max_completion_length``). A
    ``generation_kwargs`` entry among :data:`ROLLOUT_KWARGS` (a length, a number of generations,
    a stop) is a ConfigError: the turn cap is ``max_turn_tokens``; on transformers, so is any entry
    :func:`~ace_gym.agents.llm.hf_engine.checked_generation_kwargs` refuses (one of the sampling
    settings above, a search, another stop, a name ``generate`` does not take), up front.
    Logprobs are vLLM's sampled-token logprobs or the model's at the sampling temperature. Reads only :data:`TRAINER_ATTRIBUTES`.

    Conversations are rendered with TRL's prefix-preserving training variant of the tokenizer's
    template when that template is not prefix-preserving (ids must only grow from turn to turn),
    else with the tokenizer's own, with ``args.chat_template_kwargs``.
    """

    def __init__(self, trainer: Any, max_turn_tokens: int | None = None) -> None:
        from trl.chat_template_utils import get_training_chat_template, is_chat_template_prefix_preserving

        self.trainer = trainer
        self.args = trainer.args
        fixed = sorted(set(self.args.generation_kwargs or {}) & set(ROLLOUT_KWARGS))
        if fixed:
            raise ConfigError(
                "generation_kwargs",
                fixed,
                "set by ace-gym's rollout_func (a turn ends at the model's end ids or at max_turn_tokens, "
                "one generation per episode): give the per-turn cap as max_turn_tokens",
            )
        if not self.args.use_vllm:  # refused here, not at the first generation
            checked_generation_kwargs(self.args.generation_kwargs)
        self.max_turn_tokens = (
            integer("max_completion_length", self.args.max_completion_length, minimum=1)
            if max_turn_tokens is None
            else integer("max_turn_tokens", max_turn_tokens, minimum=1)
        )
        self.tokenizer = getattr(trainer.processing_class, "tokenizer", trainer.processing_class)
        self.chat_template_kwargs: dict[str, Any] = dict(self.args.chat_template_kwargs or {})
        if not is_chat_template_prefix_preserving(self.tokenizer):
            self.chat_template_kwargs["chat_template"] = get_training_chat_template(self.tokenizer)

    def generate_ids(self, prompts: Sequence[list[int]]) -> list[Completion]:
        trainer = self.trainer
        if not self.args.use_vllm:
            return self._transformers.generate_ids(prompts)
        generation = trainer.vllm_generation
        budget, generation.max_completion_length = generation.max_completion_length, self.max_turn_tokens
        try:
            _, completion_ids, logprobs, _ = generation.generate(
                prompts=[list(p) for p in prompts], images=None, num_generations=1
            )
        finally:
            generation.max_completion_length = budget
        stops = self._eos_ids()
        return [
            Completion(
                text=self.tokenizer.decode(ids, skip_special_tokens=True),
                prompt_tokens=len(prompt),
                completion_tokens=len(ids),
                prompt_token_ids=list(prompt),
                completion_token_ids=list(ids),
                finish_reason="stop" if ids and ids[-1] in stops else "length",
                logprobs=[float(top[0]) for top in token_logprobs],
            )
            for prompt, ids, token_logprobs in zip(prompts, completion_ids, logprobs, strict=True)
        ]

    def generate(
        self, conversations: Sequence[list[dict[str, Any]]], tools: Sequence[list[dict[str, Any]]]
    ) -> list[Completion]:
        """Render and generate (the collector's way for an episode whose turns the template refused)."""
        prompts = render_prompts(self.tokenizer, conversations, tools, self.chat_template_kwargs)
        fixed = {i: completion_without_generation(p) for i, p in enumerate(prompts) if isinstance(p, str)}
        generated = iter(self.generate_ids([p for p in prompts if isinstance(p, list)]))
        return [fixed[i] if i in fixed else next(generated) for i in range(len(prompts))]  # type: ignore[misc]

    def _eos_ids(self) -> set[int]:
        """The ids that end a completion: the tokenizer's end token and every one the model's
        generation config declares (as TRL stops on them)."""
        declared = self.trainer.accelerator.unwrap_model(self.trainer.model).generation_config.eos_token_id
        declared = [] if declared is None else [declared] if isinstance(declared, int) else list(declared)
        return {self.tokenizer.eos_token_id, *declared}

    @functools.cached_property
    def _transformers(self) -> HFChatEngine:
        """The transformers engine of this rollout, built at its first turn and kept: seeded once
        from (``args.seed``, the step), every turn draws on from one random stream (an engine
        built per turn drew every turn of a step with the same seed); it generates up to
        ``args.generation_batch_size`` turns at once (a step's episodes)."""
        trainer = self.trainer
        args = self.args
        return HFChatEngine(
            trainer.accelerator.unwrap_model(trainer.model),
            self.tokenizer,
            max_new_tokens=self.max_turn_tokens,
            temperature=args.temperature,
            top_p=1.0 if args.top_p is None else args.top_p,
            top_k=args.top_k or 0,
            min_p=args.min_p,
            repetition_penalty=args.repetition_penalty,
            batch_size=args.generation_batch_size,  # a step's episodes together, as TRL generates them
            seed=int(np.random.SeedSequence([args.seed, trainer.state.global_step]).generate_state(1)[0]),
            chat_template_kwargs=self.chat_template_kwargs,
            generation_kwargs=args.generation_kwargs,
        )


def rollout_func(
    specs: Sequence[EpisodeSpec],
    *,
    batch_size: int = 64,
    summary: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None,
    max_turn_tokens: int | None = None,
) -> Callable[[list[Any], Any], dict[str, list[Any]]]:
    """A ``GRPOTrainer(rollout_func=...)`` that plays ACE episodes with ace-gym's collector
    (:func:`~ace_gym.eval.run_episodes`: its multi-format parser, corrective messages, budgets and
    failure injection, as each spec sets them) against TRL's generation (:class:`TrainerEngine`),
    token-exact, ``batch_size`` episodes at a time.

    Each prompt is a :func:`train_dataset` row's ``prompt``; it names the spec whose opening it is
    (ConfigError up front when two specs open with the same conversation but are played
    differently, or for a spec with a context policy, whose prompts are no one growing
    sequence). For every prompt the function returns ``prompt_ids``, ``completion_ids`` (every
    assistant turn and the env's replies between them, up to the end of the last turn, at most
    ``max_completion_length`` ids), ``logprobs`` (0.0 on env ids), ``env_mask`` (1 on the model's
    ids, 0 on the env's: only the model's are trained) and ``ace_episode``
    (:func:`~ace_gym.integrations.trainer_callback.episode_summary`, or ``summary`` of the
    episode's record: a reward that needs more of the record adds its fields to that summary,
    keeping the default's, which :func:`episode_score` and :class:`AceMetrics` read)
    for the reward functions: pass :func:`episode_score` as a reward and :class:`AceMetrics` for
    the metrics.

    An episode is played within ``max_completion_length`` ids
    (:class:`~ace_gym.runs.loop.TokenEngineActor`'s ``response_budget``): a turn gets at most the
    room left, and an episode that fills it ends there, truncated, scored as its grid stands; so
    its reward never depends on ids the trainer cuts off. Each turn gets at most
    ``max_turn_tokens`` new tokens (default ``max_completion_length``: set it as evaluation caps a
    turn, docs/training.md).

    A warning up front when the installed TRL is outside :data:`ROLLOUT_TRL`.
    """
    check_rollout_trl(_installed_trl())
    optional_integer("max_turn_tokens", max_turn_tokens, minimum=1)
    by_opening: dict[str, EpisodeSpec] = {}
    for spec in specs:
        if any(name == "context_window" for name, _ in spec.stack.wrappers):
            raise ConfigError(
                "specs",
                spec,
                "plays a context policy: its prompts are no one growing sequence of ids for TRL to train on; "
                "train its turns one by one (runs.loop.turn_samples)",
            )
        key = _opening_key(spec.opening())
        known = by_opening.setdefault(key, spec)
        if dataclasses.replace(known, trial=0) != dataclasses.replace(spec, trial=0):
            raise ConfigError("specs", spec, f"opens with the same conversation as {known}; give one spec per opening")

    def rollout(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        from ace_gym.integrations.trainer_callback import episode_summary

        summarise = summary or episode_summary
        batch = [dataclasses.replace(by_opening[_opening_key(prompt)], trial=k) for k, prompt in enumerate(prompts)]
        budget = integer("max_completion_length", trainer.args.max_completion_length, minimum=1)
        actor = TokenEngineActor(TrainerEngine(trainer, max_turn_tokens), response_budget=budget)
        records = {r["trial"]: r for r in run_episodes(batch, actor, batch_size=batch_size, name="TrainerEngine")}
        out: dict[str, list[Any]] = {
            key: [] for key in ("prompt_ids", "completion_ids", "logprobs", "env_mask", "ace_episode")
        }
        for k in range(len(prompts)):
            record = records[k]
            tokens = record["tokens"]
            if tokens is None:
                raise ConfigError(
                    "chat template", record["key"], "refused a turn of this episode: no token-exact rollout"
                )
            last = tokens["turn_starts"][-1] + len(record["turns"][-1].get("completion_token_ids", ()))
            end = min(last, budget)
            out["prompt_ids"].append(tokens["prompt_ids"])
            out["completion_ids"].append(tokens["response_ids"][:end])
            out["logprobs"].append(tokens["logprobs"][:end])
            out["env_mask"].append(tokens["assistant_mask"][:end])
            out["ace_episode"].append(summarise(record))
        return out

    return rollout


def check_rollout_trl(version: str) -> None:
    """A warning (one line) when TRL ``version`` is outside :data:`ROLLOUT_TRL`."""
    from packaging.specifiers import SpecifierSet

    tested = ",".join(ROLLOUT_TRL)
    if version not in SpecifierSet(tested):
        logger.warning(
            "trl %s: ace-gym's rollout_func is tested with trl%s (TRL's rollout hook is experimental); "
            "episode_score checks on every batch that TRL masks the env's tokens (env_mask)",
            version,
            tested,
        )


def _installed_trl() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("trl")
    except PackageNotFoundError:
        raise ConfigError("trl", None, "is not installed: pip install '.[train]' in an ace-gym checkout") from None


def episode_score(ace_episode: Sequence[Mapping[str, Any]], **fields: Any) -> list[float]:
    """The reward of :func:`rollout_func` episodes: each episode's score (1.0 solved, else 0.0).
    ConfigError when TRL passed the rollout's ``env_mask`` on to the rewards: a TRL that does not
    read it would train on the env's replies as if the model had written them."""
    if "env_mask" in fields:
        raise ConfigError(
            "trl",
            _installed_trl(),
            "passed rollout_func's env_mask to the rewards instead of masking the env's tokens with it; "
            f"install trl{','.join(ROLLOUT_TRL)}, which rollout_func is tested with",
        )
    return [float(episode["score"]) for episode in ace_episode]


def _opening_key(messages: Sequence[Mapping[str, Any]]) -> str:
    return json.dumps([[m["role"], m["content"]] for m in messages])


class AceMetrics:
    """A TRL reward function that scores nothing (None for every completion, so it never moves
    the reward) and logs :func:`~ace_gym.integrations.trainer_callback.summary_metrics` of each
    training batch through TRL's ``log_metric``, under ``prefix`` (default ``ace/train``, apart
    from the validation callback's ``ace``): ``ace/train/score``, ``ace/train/score/<domain>``,
    ``ace/train/parse_error_rate``, ``ace/train/recovery_rate``, ``ace/train/pass@k`` (the unbiased
    estimator) and ``ace/train/avg@k`` over the batch's GRPO groups, ... Each name the summary also
    writes means what ``summary.json`` means by it for the same episodes (``score``: the mean of
    the domains' means of their cells' means).

    Under ``environment_factory`` it reads each rollout's environment (``episode``) and counts
    turns in the completion's messages: one per assistant message, as
    :func:`ace_gym.stats.episode_turns` counts policy turns; an assistant message without a tool
    call before the episode finished is a turn TRL could not read as a call. Under :func:`rollout_func` it reads
    the ``ace_episode`` summaries the rollout returns.
    """

    __name__ = "ace_metrics"  # TRL names reward columns after this

    def __init__(self, prefix: str = "ace/train") -> None:
        self.prefix = prefix

    def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        log_metric: Callable[[str, float], None] | None = None,
        environments: Sequence[Any] | None = None,
        ace_episode: Sequence[Mapping[str, Any]] | None = None,
        **_: Any,
    ) -> list[float | None]:
        from ace_gym.integrations.trainer_callback import summary_metrics

        summaries: list[Mapping[str, Any]]
        if environments is not None:
            summaries = [
                _turn_counts(env.episode, messages) for env, messages in zip(environments, completions, strict=True)
            ]
        else:
            summaries = list(ace_episode or ())
        if log_metric is not None:
            for name, value in summary_metrics(summaries, self.prefix).items():
                log_metric(name, value)
        return [None] * len(prompts)


def _turn_counts(episode: Mapping[str, Any], messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    assistant = [m for m in messages if m.get("role") == "assistant"]
    unread = bool(assistant) and not assistant[-1].get("tool_calls") and not episode["finished"]
    return {**episode, "turns": len(assistant), "parse_error_turns": int(unread)}
