"""``ACE-StepWise-v0``: APB's feedback-conditioned step-wise planning on ACE, graded exactly."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym

from ace_gym.agents.solver import ExactSolver
from ace_gym.domains import DOMAIN_NAMES, get_domain
from ace_gym.envs import AceEnv
from ace_gym.errors import ConfigError, choice, integer, number
from ace_gym.parsing import parse_turn
from ace_gym.planning.detector import ErrorTracker
from ace_gym.planning.holistic import ENDED
from ace_gym.planning.knowledge import TaskFacts, call_key, decode_arguments, facts_from_reset, trace_knowledge
from ace_gym.planning.settings import apply_settings, check_settings
from ace_gym.planning.taxonomy import Flag, grade
from ace_gym.planning.trajectory import POSITIONS, Step, cut_point, prefix_messages, scripted_trajectory
from ace_gym.spaces import arguments_json
from ace_gym.tools import reply_in
from ace_gym.wrappers.chat_spaces import AssistantTurn, ChatMessages

MAX_HORIZON = 3
SURFACE_SETTINGS = ("cost", "extraneous")
"""Settings a step-wise task may add: they change the tools shown, not what the solver does."""
_ENDING = ("done", "refusal")


class PredictionSpace(AssistantTurn):
    """A prediction: assistant text (a JSON list of calls, or calls in any format the adapter
    reads), an assistant message dict, or a list of call dicts."""

    def contains(self, x: Any) -> bool:
        return super().contains(x) or isinstance(x, list)


def read_prediction(action: Any) -> list[dict[str, Any]]:
    """The predicted calls in order, as ``{"name", "arguments"}`` dicts; never raises.

    Accepts a list of steps (``{"tool"|"name", "arguments", "thought"?}``), a JSON text of one,
    or anything :func:`ace_gym.parsing.parse_turn` reads (an assistant message, tool-call text).
    A step whose tool name is not a string is kept as it is (the detector flags it).
    """
    steps: Any = action
    if isinstance(action, str):
        try:
            steps = json.loads(action)
        except (ValueError, RecursionError):
            steps = None
    if isinstance(steps, Mapping) and isinstance(steps.get("steps"), list):
        steps = steps["steps"]
    if isinstance(steps, list):
        return [_step_call(step) for step in steps]
    parsed = parse_turn(action)
    return [{"name": call.name, "arguments": call.arguments} for call in parsed.calls]


def _step_call(step: Any) -> dict[str, Any]:
    if not isinstance(step, Mapping):
        return {"name": None, "arguments": step}
    name = step.get("tool", step.get("name"))
    return {"name": name, "arguments": step.get("arguments", {})}


def prediction_prompt(horizon: int) -> str:
    calls = "call" if horizon == 1 else f"{horizon} calls"
    return (
        f"Predict your next {calls} from this point, in order, without seeing any of their results. Answer "
        'with a JSON list of {"thought": str, "tool": str, "arguments": object} objects only.'
    )


class StepWiseEnv(gym.Env[list[dict[str, Any]], Any]):
    """Predict the next 1-3 tool calls of a solver trajectory cut short.

    ## Description
    At reset an ACE instance is drawn (``domain`` fixed, or drawn from the reset seed among all
    six when None), the exact solver plays it, and its trajectory is cut at ``position``
    ("early" 0.25, "middle" 0.5, "late" 0.75 of its tool results, or a ratio in (0, 1)) right
    after a tool result that an assistant call follows (APB's rule, :func:`cut_point`). The agent
    sees the prefix and predicts the next ``horizon`` calls without any result.

    ## Observation
    Chat messages: the system prompt, the first user message, the prefix (assistant calls and tool
    replies), and a user message asking for the prediction (:func:`prediction_prompt`).
    ``info["tools"]`` holds the tool schemas (with ``settings``' changes: ``"extraneous"``
    distractors, ``"cost"`` costs and composites).

    ## Action
    The prediction (:class:`PredictionSpace`, read by :func:`read_prediction`).

    ## Reward
    The predicted calls run one by one on a fresh copy of the episode replayed to the cut (the
    agent sees none of the results; the copy is discarded) and each is judged by the E1-E6
    detector on what the agent would have observed; fewer calls than ``horizon``, unless the last
    one ends the episode, adds an E2 flag. APB's grade of the prediction is the grade of its worst
    step (:func:`ace_gym.planning.grade`). The reward is that grade when the predicted calls are
    the reference's, in order, by tool and by what they are about (:data:`TARGET_ARGUMENTS`: the
    cell, the item ids, the attribute), and 0 otherwise; the episode ends.

    Why not APB's grade alone: it judges whether a call is an error, not whether it moves the
    task on, so a prediction that carries no information collects it: a bare
    ``get_current_grid_state`` (never an error) grades 1.0 wherever it is predicted, and an empty
    or unparseable prediction 0.4 (one E2 flag). Why not the tool name alone: the solver's next
    call is a candidate query in most tasks, so "a query on the first hidden slot", written
    without reading the trajectory, earned 0.51-0.64 (issue 38); which cell and attribute come
    next must be read from the trajectory and the task (docs/planning.md).

    ## Information
    Reset: ``domain``, ``instance_id``, ``instance_index``, ``tools``, ``system_prompt``,
    ``position``, ``cut_index`` (steps kept), ``cut_ratio`` (kept / total), ``horizon``. Step:
    ``flags`` (per predicted step, dicts of code, cause, detail), ``grades``, ``step_grade``
    (APB's grade of the prediction, what the paper reports), ``score`` (the reward), ``correct``
    (no flag anywhere), ``exact_match`` (same calls as the reference, a strict secondary metric),
    ``same_tools`` (the reference's tools, the reward's criterion until issue 38), ``same_targets``
    (the reward's criterion),
    ``reference`` (the solver's next calls) and ``predicted``.

    ## Version History
    * v0: first release; until issue 29 the reward was APB's grade (now ``info["step_grade"]``);
      until issue 38 it needed the reference's tool names only.
    """

    metadata = {"render_modes": []}  # noqa: RUF012 (gymnasium declares it per instance)

    def __init__(
        self,
        domain: str | None = None,
        dataset: str = "5x5",
        position: str | float = "middle",
        horizon: int = 1,
        settings: Sequence[str] = (),
        setting_options: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        self.domains = DOMAIN_NAMES if domain is None else (get_domain(domain).name,)
        self.dataset = dataset
        self.ratio = _ratio(position)
        self.position = position
        self.horizon = integer("horizon", horizon, minimum=1, maximum=MAX_HORIZON)
        self.settings = check_settings(settings)
        unsupported = [s for s in self.settings if s not in SURFACE_SETTINGS]
        if unsupported:
            raise ConfigError("settings", list(settings), f"step-wise tasks take only {list(SURFACE_SETTINGS)}")
        self.setting_options = {k: dict(v) for k, v in (setting_options or {}).items()}
        self._envs = {name: self._make(name) for name in self.domains}
        self.observation_space = ChatMessages()
        self.action_space = PredictionSpace(self._envs[self.domains[0]].get_wrapper_attr("tools").names)
        self._task: _Task | None = None
        self._started = False

    def _make(self, domain: str) -> gym.Env:
        return apply_settings(AceEnv(domain, self.dataset), self.settings, self.setting_options)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        super().reset(seed=seed)
        domain = self.domains[int(self.np_random.integers(len(self.domains)))]
        env = self._envs[domain]
        episode_seed = int(self.np_random.integers(2**31))
        observation, info = env.reset(seed=episode_seed, options=options)
        facts = facts_from_reset(env.get_wrapper_attr("compiled"), info)
        steps = scripted_trajectory(env, ExactSolver(), observation, info, episode_seed)[0]
        cut = cut_point(len(steps), self.ratio)
        if cut is None:  # the solver finished in one call: nothing to predict after a result
            raise ConfigError("instance", info["instance_id"], "its solver trajectory is too short to cut")
        self._started = True
        self._task = _Task(env, episode_seed, dict(options or {}), facts, steps[:cut], steps[cut : cut + self.horizon])
        messages = [
            {"role": "system", "content": info["system_prompt"]},
            {"role": "user", "content": observation},
            *prefix_messages(steps[:cut]),
            {"role": "user", "content": prediction_prompt(self.horizon)},
        ]
        reset_info: dict[str, Any] = {
            key: info[key]
            for key in ("domain", "instance_id", "instance_index", "tools", "system_prompt")
            if key in info
        }
        reset_info.update(position=str(self.position), cut_index=cut, cut_ratio=cut / len(steps), horizon=self.horizon)
        return messages, reset_info

    def step(self, action: Any) -> tuple[list[dict[str, Any]], float, bool, bool, dict[str, Any]]:
        task = self._task
        if task is None:
            if not self._started:
                raise gym.error.ResetNeeded("Cannot call step() before reset()")
            return [dict(ENDED)], 0.0, True, False, {}
        self._task = None
        predicted = read_prediction(action)[: self.horizon]
        flags = task.judge(predicted, self.horizon)
        grades = [grade(step) for step in flags]
        reference = [dict(action) for action, _ in task.reference]
        exact = len(predicted) == len(reference) and all(
            _identity(p) == _identity(r) for p, r in zip(predicted, reference, strict=True)
        )
        step_grade = min(grades)
        same_tools = [call["name"] for call in predicted] == [call["name"] for call in reference]
        same_targets = len(predicted) == len(reference) and all(
            _target(p) == _target(r) for p, r in zip(predicted, reference, strict=True)
        )
        reward = step_grade if same_targets else 0.0
        info = {
            "flags": [[flag.as_dict() for flag in step] for step in flags],
            "grades": grades,
            "step_grade": step_grade,
            "score": reward,
            "correct": not any(flags),
            "exact_match": exact,
            "same_tools": same_tools,
            "same_targets": same_targets,
            "reference": reference,
            "predicted": [_plain(call) for call in predicted],
        }
        note = {"role": "user", "content": f"Prediction graded {reward:.1f}."}
        return [note], reward, True, False, info


class _Task:
    """One step-wise task: the env stack it was cut from, how to replay it, and the reference."""

    def __init__(
        self,
        env: gym.Env,
        seed: int,
        options: dict[str, Any],
        facts: TaskFacts,
        prefix: list[Step],
        reference: list[Step],
    ) -> None:
        self.env, self.seed, self.options = env, seed, options
        self.facts, self.prefix, self.reference = facts, prefix, reference

    def judge(self, predicted: list[dict[str, Any]], horizon: int) -> list[tuple[Flag, ...]]:
        """The flags of each predicted call, run on a copy of the episode replayed to the cut."""
        env = self.env
        env.reset(seed=self.seed, options=self.options)
        for action, _ in self.prefix:
            env.step(action)
        tracker = ErrorTracker(self.facts)
        tracker.knowledge = trace_knowledge(self.facts, self.prefix)
        flags: list[tuple[Flag, ...]] = []
        ended = False
        for call in predicted:
            found = tracker.judge(call)
            flags.append(found)
            if ended:
                continue
            _, _, terminated, truncated, info = env.step(call)
            tracker.observe(call, reply_in(info))
            ended = terminated or truncated
        last = (
            self.facts.tools.get(predicted[-1]["name"])
            if predicted and isinstance(predicted[-1]["name"], str)
            else None
        )
        if len(predicted) < horizon and (last is None or last.kind not in _ENDING):
            short = Flag("short_prediction", f"{len(predicted)} of {horizon} calls predicted")
            flags.append((short,))
        return flags


TARGET_ARGUMENTS = ("row", "col", "id", "ids", "field")
"""The arguments that say what a call is about (which cell, which item, which attribute), as
opposed to how it asks (a query's operator and value: ``>= -1e9`` and ``not_in []`` both list
every candidate). A prediction earns its grade only when each call names the reference's tool
and these arguments (issue 38)."""


def _target(call: Mapping[str, Any]) -> str | None:
    """A call's tool and :data:`TARGET_ARGUMENTS` in canonical form (lists as sets), None for
    a call without a name or whose arguments are not an object."""
    name, arguments = call.get("name"), decode_arguments(call.get("arguments"))
    if not isinstance(name, str) or arguments is None:
        return None
    target = {key: arguments[key] for key in TARGET_ARGUMENTS if key in arguments}
    for key, value in target.items():  # a list of ids or fields: its order says nothing
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            target[key] = sorted(set(value))
    return call_key(name, target)


def _identity(call: Mapping[str, Any]) -> str | None:
    """A call's canonical identity (name and decoded arguments), None for a call without a name."""
    name = call.get("name")
    return call_key(name, decode_arguments(call.get("arguments")) or {}) if isinstance(name, str) else None


def _ratio(position: str | float) -> float:
    if isinstance(position, str):
        return POSITIONS[choice("position", position, POSITIONS)]
    ratio = float(number("position", position, above=0, maximum=1))
    if ratio >= 1:
        raise ConfigError("position", position, "a ratio must be below 1")
    return ratio


def _plain(value: Any) -> Any:
    """A JSON-safe copy of a model-sent value (what JSON cannot hold is written as its repr)."""
    return json.loads(arguments_json(value))
