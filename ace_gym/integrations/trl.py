"""TRL's multi-turn training paths on ACE envs (``pip install "ace-gym[train]"``: trl >= 1.8).

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
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

from ace_gym.domains import DOMAIN_NAMES, get_domain
from ace_gym.envs import AceEnv
from ace_gym.errors import ConfigError
from ace_gym.eval.rollout import EpisodeSpec
from ace_gym.scoring import evaluate_grid
from ace_gym.tools import Tool, toolset
from ace_gym.wrappers import ToolFailureInjection

RETURNS = 'The tool\'s reply: a JSON object with "status", "messages" and "data".'
"""The ``Returns:`` section of every generated tool method."""
INSTANCE_COLUMNS = ("dataset", "instance_index", "instance_id", "seed")
"""The columns of :func:`train_dataset` that ``reset`` reads (with ``environment``, the domain)."""


class AceToolEnvironment:
    """One ACE episode at a time for TRL: the base of the per-domain classes of
    :func:`environment_factory` (``domain``, ``dataset``, ``env_kwargs`` and ``tool_failure_rate``
    are class attributes there; the public methods are the tools).

    ``reset(**row)`` starts the episode of a :func:`train_dataset` row (``instance_index`` or
    ``instance_id``, and ``seed``, which also seeds failure injection). It returns None when the
    row has a ``prompt`` (the opening conversation is already there), else the system prompt and
    the first user message as one text (TRL appends it to the row's user message). Each tool call
    is one step of ``ToolFailureInjection(AceEnv(domain, dataset, **env_kwargs), rate)``, so
    budgets (``max_steps``, query and check budgets) and injected failures apply; a call after the
    episode ended gets the env's failed envelope. ``get_reward()`` is the score of the finished
    episode, or of the grid as it stands when the model stopped calling tools (as a turn limit
    scores it). ``episode`` summarises the episode for :class:`AceMetrics`.
    """

    domain: ClassVar[str]
    dataset: ClassVar[str]
    env_kwargs: ClassVar[Mapping[str, Any]]
    tool_failure_rate: ClassVar[float]

    def __init__(self) -> None:
        core = AceEnv(self.domain, self.dataset, **dict(self.env_kwargs))
        self._core = core
        self._env = ToolFailureInjection(core, self.tool_failure_rate) if self.tool_failure_rate > 0 else core
        self._score: float | None = None
        self._episode: dict[str, Any] = {}

    def reset(self, **row: Any) -> str | None:
        if row.get("dataset", self.dataset) != self.dataset:
            raise ConfigError("dataset", row["dataset"], f"this environment plays {self.dataset!r}")
        options = {key: row[key] for key in ("instance_id", "instance_index") if row.get(key) is not None}
        seed = row.get("seed")
        observation, info = self._env.reset(seed=None if seed is None else int(seed), options=options)
        self._score = None
        self._episode = {
            "domain": self.domain,
            "group": json.dumps([self.dataset, self.domain, info["instance_id"], seed]),
            "tool_calls": 0,
            "injected_failures": 0,
            "retried_failed_calls": 0,
        }
        return None if "prompt" in row else f"{info['system_prompt']}\n\n{observation}"

    def get_reward(self) -> float:
        if self._score is None:
            return float(evaluate_grid(self._core.compiled, self._core.state.grid)[0])
        return self._score

    @property
    def episode(self) -> dict[str, Any]:
        """The current episode for :func:`~ace_gym.integrations.trainer_callback.summary_metrics`:
        ``domain``, ``group`` (same dataset, instance and seed), ``score``, ``finished`` (by
        ``done`` or a budget), ``tool_calls``, ``injected_failures``, ``retried_failed_calls``."""
        return {**self._episode, "score": self.get_reward(), "finished": self._score is not None}

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        observation, _, terminated, truncated, info = self._env.step({"name": name, "arguments": arguments})
        self._episode["tool_calls"] += 1
        for key in ("injected_failures", "retried_failed_calls"):
            self._episode[key] = info.get(key, self._episode[key])
        if (terminated or truncated) and "score" in info and self._score is None:
            self._score = float(info["score"])
        return str(observation)


def tool_method(tool: Tool) -> Callable[..., str]:
    """A method that calls ``tool`` on the environment, with the tool's name, parameters, type
    hints and a Google docstring built from its schema (what ``transformers.get_json_schema``
    reads). It takes any keyword arguments, so a call with missing or extra ones reaches the env,
    which answers with an error envelope rather than an exception."""
    function = tool.schema["function"]
    properties = function["parameters"]["properties"]

    def method(self: AceToolEnvironment, **arguments: Any) -> str:
        return self._call(tool.name, arguments)

    hints = inspect.get_annotations(tool.function, eval_str=True)
    original = inspect.signature(tool.function).parameters
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
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
    domain: str, *, dataset: str = "5x5", env_kwargs: Mapping[str, Any] | None = None, tool_failure_rate: float = 0.0
) -> type[AceToolEnvironment]:
    """The :class:`AceToolEnvironment` subclass of ``domain`` with one method per tool.

    Arguments are checked here (ConfigError): the domain and dataset exist, ``env_kwargs`` are
    :class:`~ace_gym.envs.AceEnv` keyword arguments, the failure rate is a probability.
    """
    spec = get_domain(domain)
    kwargs = dict(env_kwargs or {})
    ToolFailureInjection(AceEnv(domain, dataset, **kwargs), tool_failure_rate)  # validates everything once
    attributes: dict[str, Any] = {
        "domain": domain,
        "dataset": dataset,
        "env_kwargs": kwargs,
        "tool_failure_rate": float(tool_failure_rate),
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
) -> dict[str, type[AceToolEnvironment]]:
    """``{domain: environment class}`` for ``GRPOTrainer(environment_factory=...)``: each row's
    ``environment`` column (see :func:`train_dataset`) picks the class, and only that domain's
    tools are shown to the model. The settings apply to every domain (see :func:`environment_class`)."""
    return {
        domain: environment_class(domain, dataset=dataset, env_kwargs=env_kwargs, tool_failure_rate=tool_failure_rate)
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
        env = spec.make_env()
        messages, _ = env.reset(seed=spec.seed, options=spec.reset_options())
        env.close()
        rows["prompt"].append([{"role": m["role"], "content": m["content"]} for m in messages])
        rows["environment"].append(spec.domain)
        for column in INSTANCE_COLUMNS:
            rows[column].append(getattr(spec, column))
    return Dataset.from_dict(rows)


class AceMetrics:
    """A TRL reward function that scores nothing (None for every completion, so it never moves
    the reward) and logs :func:`~ace_gym.integrations.trainer_callback.summary_metrics` of the
    batch through TRL's ``log_metric``: ``ace/score``, ``ace/score/<domain>``,
    ``ace/parse_error_rate``, ``ace/recovery_rate``, ``ace/pass@k``, ``ace/avg@k`` over the GRPO
    groups of the batch, ...

    Under ``environment_factory`` it reads each rollout's environment (``episode``) and counts
    turns in the completion's messages: an assistant message without a tool call before the
    episode finished is a turn TRL could not read as a call. Under :func:`rollout_func` it reads
    the ``ace_episode`` summaries the rollout returns.
    """

    __name__ = "ace_metrics"  # TRL names reward columns after this

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

        if environments is not None:
            summaries = [
                _turn_counts(env.episode, messages) for env, messages in zip(environments, completions, strict=True)
            ]
        else:
            summaries = list(ace_episode or ())
        if log_metric is not None:
            for name, value in summary_metrics(summaries).items():
                log_metric(name, value)
        return [None] * len(prompts)


def _turn_counts(episode: Mapping[str, Any], messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    assistant = [m for m in messages if m.get("role") == "assistant"]
    unread = bool(assistant) and not assistant[-1].get("tool_calls") and not episode["finished"]
    return {**episode, "turns": len(assistant), "parse_error_turns": int(unread)}
