"""ACE as an AgencyBench scenario: one instance in ascending stages, each with feedback rounds."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from typing import Any

from ace_gym.domains.tool_names import TOOL_NAMES
from ace_gym.envs.ace_env import AceEnv, ActionType
from ace_gym.errors import integer
from ace_gym.feedback.rounds import ACE_THRESHOLD, TRAINING_REWARD, Rounds
from ace_gym.feedback.rubric import graded_rules, item_names
from ace_gym.feedback.simulator import UserSimulator
from ace_gym.feedback.stages import Stage, grade_stage, split_stages
from ace_gym.instance import CompiledInstance
from ace_gym.prompts import render_task_instruction
from ace_gym.scoring import grid_of_ids

FINAL_KEYS = ("score", "reason", "grid")
"""What the core env reports when a ``done`` ends its episode; dropped when only a stage ends."""


class ScenarioEnv(AceEnv):
    """One ACE instance played as a scenario of ascending stages (docs/feedback_rounds.md).

    ## Description
    AgencyBench's scenarios chain subtasks of rising difficulty whose earlier results shape later
    ones. Here the instance's hidden slots are split, in reading order, into ``stages`` stages
    that grow in size (:func:`ace_gym.feedback.stages.stage_sizes`), filled one stage at a time.
    A stage is accepted on its slots' rubric items plus the upper-bound global rules of the grid
    as it stands; the final stage adds the lower bounds on the complete grid. The grid carries
    over and a closed stage's slots are fixed, so an early choice can doom later stages: every
    stage's slots and rules are stated from the start, so a policy that plans the whole grid
    before it fills stage 1 passes every stage (the exact solver does), and one that fills each
    stage on its own often fails the last. Each stage runs AgencyBench's feedback rounds
    (:class:`~ace_gym.feedback.rounds.Rounds`).

    ## Action, tools
    As :class:`AceEnv`; the queries answer on every hidden slot. ``set_slot`` on a slot of a later
    stage answers that it belongs to a later stage, on a slot of a closed stage that it is fixed.
    ``done`` submits the current stage (so does the ``max_steps`` limit, which counts the tool
    calls of one attempt). The global check needs a complete grid, as in ACE: it helps at the
    final stage.

    ## Observation
    At reset, the core env's user message and a note naming each stage's slots (stage 1's to fill
    now); the system prompt (``info["system_prompt"]``) is the core env's, stating every global
    rule and every hidden slot's rules. After a submission: below the threshold with attempts
    left, a failed envelope whose ``messages`` is the feedback (it never names a cell); when a
    stage closes, a success envelope whose ``messages`` opens the next stage (the verdict, its
    slots and their rules, the grid, the stages still to come) and whose ``data`` is
    ``{"stage", "stages", "accepted"}``; the final stage's ``done`` gives the core env's stop
    envelope.

    ## Reward
    ``final_reward="pass_discount"`` (the default): the scenario's verdict, paid when the final
    stage closes: the product of the stages' :meth:`Rounds.reward
    <ace_gym.feedback.rounds.Rounds.reward>` (``gamma ** (j - 1)`` for a stage passed at attempt
    j), so 1 when every stage passes at its first attempt and 0 when any stage fails; 0 on every
    other step. Early stages hold only their slots and the upper bounds, which a grid filled
    without planning meets, so a per-stage verdict would pay it most of the return.
    ``"final"`` (not for training): when a stage closes, its strict score divided by the number of
    stages (the return is the mean stage score, 0.95-0.96 for a random slot-valid grid). Floor: 0
    for a stage left empty; a random slot-valid grid earns its scenario pass rate (0.10-0.25 on
    the bundled data). AgencyBench's rubric score, which pays upper bounds on an empty stage,
    stays in the stage logs' ``scores`` for the metrics.

    ## Episode End
    Terminated by the final stage's last submission through ``done``; truncated when it ends
    through ``max_steps``. A stage that fails its last attempt closes as it stands and the next
    one opens.

    ## Arguments
    ``stages`` (default 5); per stage ``max_attempts`` (2, AgencyBench's K), ``threshold`` (1.0:
    a stage is accepted when every item is met), ``feedback``, ``final_reward``, ``gamma`` as in
    :class:`~ace_gym.feedback.FeedbackRounds`; the rest as :class:`AceEnv`.

    ## Information
    Every step: ``scenario`` = ``{"stage"`` (1-based), ``"stages"``, ``"stage_slots"`` (positions
    of the current stage's slots), ``"passed"`` (every closed stage accepted), ``"finished"}``; at
    reset and on every step that submitted, in full (:meth:`scenario_log`): also ``"stage_sizes"``
    and ``"stages_log"``, one :meth:`Rounds.info <ace_gym.feedback.rounds.Rounds.info>` per stage
    opened so far (the metrics read ``scores``, ``max_attempts``, ``threshold``). The final step
    also carries the core env's ``score``, ``reason``, ``grid`` (ACE's verdict on the whole grid).

    ## Version History
    * v0: first release. Issue 38: every stage's slots and rules are stated from the start (they
      used to come with their stage, so no policy could plan for them: the exact solver passed
      0.28-0.50 of the scenarios) and the queries answer on every hidden slot.
    """

    def __init__(
        self,
        domain: str = "course",
        dataset: str | os.PathLike[str] | None = None,
        *,
        stages: int = 5,
        max_attempts: int = 2,
        threshold: float | str = ACE_THRESHOLD,
        feedback: str | UserSimulator = "diagnostic",
        final_reward: str = TRAINING_REWARD,
        gamma: float = 0.9,
        **env_options: Any,
    ) -> None:
        self.stage_count = integer("stages", stages, minimum=1)
        self.rounds = Rounds(max_attempts, threshold, feedback, final_reward, gamma)
        super().__init__(domain, dataset, **env_options)
        self._stages: tuple[Stage, ...] = ()
        self._stage = 0
        self._logs: list[dict[str, Any]] = []
        self._stage_rewards: list[float] = []
        self._hidden_ids: frozenset[str] = frozenset()

    # -- gymnasium API -----------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        observation, info = super().reset(seed=seed, options=options)
        compiled = self.compiled
        self._stages = split_stages(compiled, self.stage_count)
        self._hidden_ids = frozenset(item for slot in compiled.slots for item in slot.candidate_ids)
        self._logs = []
        self._stage_rewards = []
        self._open(0)
        info["scenario"] = self.scenario_log()
        return f"{observation}\n\n{_opening_note(compiled, self._stages)}", info

    def step(self, action: ActionType) -> tuple[str, float, bool, bool, dict[str, Any]]:
        observation, _, terminated, truncated, info = super().step(action)
        if (self.rounds.finished and self._stage == len(self._stages) - 1) or not (terminated or truncated):
            info["scenario"] = self._progress()
            return observation, 0.0, terminated, truncated, info
        stage = self._stages[self._stage]
        verdict = self.rounds.submit(grade_stage(self.compiled, self.state.grid, stage), self._hidden_ids)
        self._logs[-1] = self.rounds.info()
        reward = self._reward(stage) if verdict.finished else 0.0
        if verdict.feedback is not None:
            observation = self.resume(verdict.feedback)
            terminated = truncated = False
        elif not stage.final:
            self._open(self._stage + 1)
            self._reopen()
            observation = self._next_stage_envelope(verdict.passed)
            terminated = truncated = False
        if not (terminated or truncated):
            for key in FINAL_KEYS:
                info.pop(key, None)
        info["scenario"] = self.scenario_log()
        return observation, reward, terminated, truncated, info

    def _reward(self, closed: Stage) -> float:
        """The reward of the step that closed stage ``closed`` (see Reward)."""
        self._stage_rewards.append(self.rounds.reward())
        if self.rounds.final_reward == "final":
            return self._stage_rewards[-1] / len(self._stages)
        return math.prod(self._stage_rewards) if closed.final else 0.0

    # -- stages --------------------------------------------------------------------------------

    def _open(self, index: int) -> None:
        """Open stage ``index``: make only its slots writable, start its rounds."""
        self._stage = index
        stage = self._stages[index]
        compiled = self.compiled
        self.state.opened = frozenset(s for opened in self._stages[: index + 1] for s in opened.slots)
        self.state.writable = frozenset(stage.slots)
        self.rounds.begin(item_names(compiled, stage.slots, graded_rules(compiled, stage.final)))
        self._logs.append(self.rounds.info())

    def scenario_log(self) -> dict[str, Any]:
        """Where the scenario stands, in full: the step's ``info["scenario"]`` (see Information)
        with ``stage_sizes`` and one :meth:`Rounds.info <ace_gym.feedback.rounds.Rounds.info>` per
        stage opened so far (``stages_log``); ResetNeeded before ``reset``."""
        self._require_state()
        return {
            **self._progress(),
            "stage_sizes": [len(stage.slots) for stage in self._stages],
            "stages_log": [dict(log) for log in self._logs],
        }

    def _next_stage_envelope(self, accepted: bool) -> str:
        compiled, stage = self.compiled, self._stages[self._stage]
        verdict = "was accepted" if accepted else "was not accepted"
        text = (
            f"Stage {stage.index} of {stage.count} {verdict}; its slots are now fixed. "
            f"Stage {stage.index + 1} of {stage.count}: fill the hidden slots {_cells(compiled, stage)} now, "
            f"then call `{TOOL_NAMES['done']}`. Their constraints:\n\n"
            f"{_slot_blocks(compiled, stage)}\n\n"
            f"The current grid:\n{json.dumps(grid_of_ids(compiled, self.state.grid), ensure_ascii=False)}\n\n"
            f"{_later_note(compiled, self._stages[stage.index + 1 :])}"
        )
        data = {"stage": stage.index + 1, "stages": stage.count, "accepted": accepted}
        return json.dumps({"status": "success", "messages": text, "data": data}, ensure_ascii=False)

    def _progress(self) -> dict[str, Any]:
        compiled, stage = self.compiled, self._stages[self._stage]
        closed = self._logs if self.rounds.finished else self._logs[:-1]
        return {
            "stage": stage.index + 1,
            "stages": stage.count,
            "stage_slots": [[compiled.slots[s].row, compiled.slots[s].col] for s in stage.slots],
            "passed": all(log["passed"] for log in closed),
            "finished": self.rounds.finished and stage.final,
        }


def stage_instruction(compiled: CompiledInstance, stage: Stage) -> str:
    """The task policy text stating every global rule and the slot rules of ``stage``'s slots."""
    slot_rules = [
        (
            compiled.slots[s].row,
            compiled.slots[s].col,
            [(attribute, kind, bound) for _, attribute, kind, bound in compiled.slots[s].rules],
        )
        for s in stage.slots
    ]
    bounds = {rule.name: rule.bound for rule in compiled.global_rules}
    return render_task_instruction(compiled.domain, compiled.rows, compiled.cols, bounds, slot_rules)


def _slot_blocks(compiled: CompiledInstance, stage: Stage) -> str:
    """The "For slot (r, c):" blocks of ``stage``, as the task policy writes them."""
    return stage_instruction(compiled, stage).split("For the hidden-slot constraints:\n", 1)[1].rsplit("\n\n", 1)[0]


def _cells(compiled: CompiledInstance, stage: Stage) -> str:
    """The cells of ``stage``'s slots, ``(r, c), (r, c)``."""
    return ", ".join(f"({compiled.slots[s].row}, {compiled.slots[s].col})" for s in stage.slots)


def _later_note(compiled: CompiledInstance, later: Sequence[Stage]) -> str:
    """What the stages after the current one (``later``) hold, and that they can be planned now."""
    if not later:
        return "This is the final stage: the completed grid must satisfy every global constraint."
    stages = "; ".join(f"stage {stage.index + 1}, {_cells(compiled, stage)}" for stage in later)
    return (
        f"The other empty slots belong to later stages ({stages}): leave them empty for now. Their "
        "constraints are in the task policy. A stage's slots are fixed once it closes and the final "
        "stage's completed grid must satisfy every global constraint, so choose with the later stages in mind."
    )


def _opening_note(compiled: CompiledInstance, stages: Sequence[Stage]) -> str:
    first = stages[0]
    return (
        f"This task comes in {first.count} stages. Stage 1 of {first.count}: fill the hidden slots "
        f"{_cells(compiled, first)} (their constraints are in the task policy), then call `{TOOL_NAMES['done']}`. "
        f"{_later_note(compiled, stages[1:])}"
    )
