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
MAX_DRAWS = 64
"""Instances a reset draws at most, from its seed, to find one whose solver trajectory has a
decision step (:func:`is_decision`)."""
SET_KINDS = ("set_slot", "set_and_check")
DECISION_CANDIDATES = 3
"""The fewest slot-valid candidates a cell has where its set is a decision: a uniform guess among
them is right at most a third of the time, and the reward's cost of a wrong guess (at most 1/2)
keeps a guess's reward from swinging more than the task is worth (:func:`is_decision`)."""
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
    six when None; item names renumbered per episode, since the published data's give the truth
    away), the exact solver plays it, and its trajectory is cut at a **decision**
    (:func:`is_decision`: a ``set_slot`` of a cell its own rules leave with
    :data:`DECISION_CANDIDATES` or more candidates, whose id the global rules decide), the one
    nearest APB's cut at ``position`` ("early" 0.25, "middle" 0.5, "late" 0.75 of its tool
    results, or a ratio in (0, 1); :func:`decision_point`). An instance without a decision is
    redrawn from the seed. The agent sees the prefix and predicts the next ``horizon`` calls
    without any result. At APB's own cut the next call is mostly the next query of the solver's
    sweep, which the trajectory's shape gives away (issue 38).

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
    step (:func:`ace_gym.planning.grade`). The reward is:

    * that grade when the predicted calls are the reference's, in order, by tool and by what they
      are about (:data:`TARGET_ARGUMENTS`: the cell, the item ids, the attribute);
    * ``-chance / (1 - chance)`` when they are the reference's but for a set's id (a wrong guess
      of the decision), where ``chance`` (``info["chance"]``, :func:`guess_chance`) is the
      probability that a uniform draw among each set cell's slot-valid candidates is right: a
      uniform guess earns 0 on average on every task (and a guess by candidate order about 0:
      the bundled data's order says nothing of the truth). The reward lies in [-1/2, 1];
    * 0 otherwise. The episode ends.

    Why not APB's grade alone: it judges whether a call is an error, not whether it moves the
    task on, so a prediction that carries no information collects it: a bare
    ``get_current_grid_state`` (never an error) grades 1.0 wherever it is predicted, and an empty
    or unparseable prediction 0.4 (one E2 flag). Why not the tool and target at APB's cut: the
    solver's next call there is mostly its sweep's next query, so "a query on the first hidden
    slot" earned 0.51-0.64 at 1944dd5 and "the call after the last one in order" 0.19 at
    725c7af (seeds 0-99, docs/planning.md).

    ## Information
    Reset: ``domain``, ``instance_id``, ``instance_index``, ``tools``, ``system_prompt``,
    ``position``, ``cut_index`` (steps kept), ``cut_ratio`` (kept / total), ``horizon``,
    ``chance`` (a uniform guess's chance of the reference's set ids). Step:
    ``flags`` (per predicted step, dicts of code, cause, detail), ``grades``, ``step_grade``
    (APB's grade of the prediction, what the paper reports), ``score`` (the reward), ``correct``
    (no flag anywhere), ``exact_match`` (same calls as the reference, a strict secondary metric),
    ``same_tools`` (the reference's tools, the reward's criterion until issue 38), ``same_targets``
    (the reward's criterion), ``same_cells`` (the reference's calls but for a set's id: a wrong guess),
    ``reference`` (the solver's next calls) and ``predicted``.

    ## Version History
    * v0: first release; until issue 29 the reward was APB's grade (now ``info["step_grade"]``);
      until issue 38 it needed the reference's tool names only, and the cut was APB's (a wrong
      guess cost nothing).
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
        # renumbered names: the published data's names give each cell's truth away (docs/compatibility.md)
        env = AceEnv(domain, self.dataset, item_names="renumbered")
        return apply_settings(env, self.settings, self.setting_options)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        super().reset(seed=seed)
        domain = self.domains[int(self.np_random.integers(len(self.domains)))]
        env = self._envs[domain]
        for _ in range(MAX_DRAWS):
            episode_seed = int(self.np_random.integers(2**31))
            observation, info = env.reset(seed=episode_seed, options=options)
            facts = facts_from_reset(env.get_wrapper_attr("compiled"), info)
            if not any(len(valid) >= DECISION_CANDIDATES for valid in facts.slot_valid.values()):
                continue  # no cell's own rules leave it open enough: the trajectory decides nothing
            steps = scripted_trajectory(env, ExactSolver(), observation, info, episode_seed)[0]
            cut = decision_point(facts, steps, self.ratio)
            if cut is not None:
                break
        else:
            raise ConfigError("instance", info["instance_id"], f"no decision step in {MAX_DRAWS} draws to cut at")
        self._started = True
        reference = steps[cut : cut + self.horizon]
        self._task = _Task(env, episode_seed, dict(options or {}), facts, steps[:cut], reference)
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
        reset_info.update(
            position=str(self.position),
            cut_index=cut,
            cut_ratio=cut / len(steps),
            horizon=self.horizon,
            chance=guess_chance(facts, [action for action, _ in reference]),
        )
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
        same_cells = len(predicted) == len(reference) and all(
            _target(p, with_id=False) == _target(r, with_id=False) for p, r in zip(predicted, reference, strict=True)
        )
        reward = step_grade if same_targets else (-task.chance / (1 - task.chance) if same_cells else 0.0)
        info = {
            "flags": [[flag.as_dict() for flag in step] for step in flags],
            "grades": grades,
            "step_grade": step_grade,
            "score": reward,
            "correct": not any(flags),
            "exact_match": exact,
            "same_tools": same_tools,
            "same_targets": same_targets,
            "same_cells": same_cells,
            "reference": reference,
            "predicted": [_plain(call) for call in predicted],
        }
        note = {"role": "user", "content": f"Prediction graded {reward:.2f}."}
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
        self.chance = guess_chance(facts, [action for action, _ in reference])

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


def _target(call: Mapping[str, Any], with_id: bool = True) -> str | None:
    """A call's tool and :data:`TARGET_ARGUMENTS` in canonical form (lists as sets), None for
    a call without a name or whose arguments are not an object; without ``with_id``, the ``id``
    is left out (what a guess on the right cell shares with the reference)."""
    name, arguments = call.get("name"), decode_arguments(call.get("arguments"))
    if not isinstance(name, str) or arguments is None:
        return None
    kept = TARGET_ARGUMENTS if with_id else tuple(key for key in TARGET_ARGUMENTS if key != "id")
    target = {key: arguments[key] for key in kept if key in arguments}
    for key, value in target.items():  # a list of ids or fields: its order says nothing
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            target[key] = sorted(set(value))
    return call_key(name, target)


def _set_cell(facts: TaskFacts, action: Mapping[str, Any]) -> tuple[int, int] | None:
    """The hidden cell a ``set_slot`` (or set-and-check) action fills, None for any other action."""
    name, arguments = action.get("name"), decode_arguments(action.get("arguments")) or {}
    entry = facts.tools.get(name) if isinstance(name, str) else None
    if entry is None or entry.kind not in SET_KINDS:
        return None
    cell = (arguments.get("row"), arguments.get("col"))
    return cell if cell in facts.hidden else None  # type: ignore[return-value]


def is_decision(facts: TaskFacts, action: Mapping[str, Any]) -> bool:
    """Whether ``action`` is a decision: a set of a hidden cell that its own rules leave open
    (:data:`DECISION_CANDIDATES` or more slot-valid candidates), whose id the global rules decide."""
    cell = _set_cell(facts, action)
    return cell is not None and len(facts.slot_valid[cell]) >= DECISION_CANDIDATES


def decision_point(facts: TaskFacts, steps: Sequence[Step], ratio: float) -> int | None:
    """Where to cut ``steps``: the decision step (:func:`is_decision`) nearest APB's cut at
    ``ratio`` (:func:`cut_point`), the earlier one on a tie; None when there is none."""
    target = cut_point(len(steps), ratio)
    decisions = [index for index, (action, _) in enumerate(steps) if index >= 1 and is_decision(facts, action)]
    if target is None or not decisions:
        return None
    return min(decisions, key=lambda index: (abs(index - target), index))


def guess_chance(facts: TaskFacts, reference: Sequence[Mapping[str, Any]]) -> float:
    """The chance that ``reference``'s sets are guessed right by a uniform draw among each cell's
    slot-valid candidates: the product of 1 / (slot-valid count) over its sets."""
    chance = 1.0
    for action in reference:
        cell = _set_cell(facts, action)
        if cell is not None:
            chance /= len(facts.slot_valid[cell])
    return chance


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
