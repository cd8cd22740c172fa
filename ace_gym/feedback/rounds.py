"""The attempt loop of one task (an episode, or one scenario stage): grade, pass or give feedback.

:class:`Rounds` holds a task's attempts. Each submission is graded on its rubric; a score at or
above the threshold passes and ends the task, and so does the last attempt; otherwise the
feedback is written (by the template or a :class:`UserSimulator`) and the next attempt begins.
:class:`~ace_gym.feedback.FeedbackRounds` and the scenario env both run their tasks through it,
so both report the same ``info`` fields and rewards.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ace_gym.errors import ConfigError, choice, integer, number
from ace_gym.feedback.rubric import Rubric
from ace_gym.feedback.simulator import TemplateFeedback, UserSimulator
from ace_gym.feedback.texts import FEEDBACK_STYLES, Submission, mentions_a_cell
from ace_gym.tools import valid_text

ACE_THRESHOLD = 1.0
"""The default pass threshold: ACE's own verdict, a grid passes only when it meets every rubric item."""
AGENCYBENCH_THRESHOLD = 0.6
"""AgencyBench's pass threshold (60 %): on ACE every greedy grid reaches it at once, so Att, Pass@k
and Rise say nothing there; kept for reproducing the paper's protocol."""
THRESHOLD_NAMES: dict[str, float] = {"ace": ACE_THRESHOLD, "paper": AGENCYBENCH_THRESHOLD}
"""Named thresholds: ``threshold="paper"`` is AgencyBench's 0.6, ``"ace"`` the default 1.0."""

FinalReward = Literal["final", "pass_discount"]
FINAL_REWARDS: tuple[FinalReward, ...] = ("final", "pass_discount")
TRAINING_REWARD: FinalReward = "pass_discount"
"""The default ``final_reward``: the verdict. The rubric's share met (``"final"``) pays a grid
filled without planning 0.91-0.96 against the solver's 0.98-1.0 (issue 38); the verdict pays it
its pass rate."""


@dataclass(frozen=True)
class Verdict:
    """What a submission led to: ``passed``; ``finished`` (passed, or no attempt left); the
    ``feedback`` for the next attempt (None when finished)."""

    passed: bool
    finished: bool
    feedback: str | None


def resolve_threshold(threshold: float | str) -> float:
    """A pass threshold as a number: one in [0, 1], or a name of :data:`THRESHOLD_NAMES`.
    ConfigError for anything else."""
    if isinstance(threshold, str):
        return THRESHOLD_NAMES[choice("threshold", threshold, tuple(THRESHOLD_NAMES))]
    return float(number("threshold", threshold, minimum=0, maximum=1))


class Rounds:
    """One task's attempts under AgencyBench's protocol.

    ``max_attempts`` (K >= 1) submissions at most; a score ``>= threshold`` (in [0, 1], or a name
    of :data:`THRESHOLD_NAMES`; default :data:`ACE_THRESHOLD`) passes;
    ``feedback`` is a style of :data:`~ace_gym.feedback.texts.FEEDBACK_STYLES` or a
    :class:`UserSimulator`; ``final_reward`` is ``"pass_discount"`` (the default,
    :data:`TRAINING_REWARD`: 1 on a pass at attempt j, times ``gamma ** (j - 1)``; 0 on a failure,
    and on a pass whose strict score is under the threshold) or ``"final"`` (the last attempt's
    :attr:`~ace_gym.feedback.rubric.Rubric.strict_score`, not for training: a grid filled without
    planning earns most of it), with ``gamma`` in [0, 1]. ConfigError for anything else.

    Passing and the metrics read ``scores``, AgencyBench's rubric scores (the paper's protocol);
    the reward reads :attr:`strict_scores`, which do not pay the upper bounds an unfilled grid meets
    (:mod:`ace_gym.feedback.rubric`), so ``done`` at once earns 0.
    """

    def __init__(
        self,
        max_attempts: int = 2,
        threshold: float | str = ACE_THRESHOLD,
        feedback: str | UserSimulator = "diagnostic",
        final_reward: str = TRAINING_REWARD,
        gamma: float = 0.9,
    ) -> None:
        self.max_attempts = integer("max_attempts", max_attempts, minimum=1)
        self.threshold = resolve_threshold(threshold)
        if isinstance(feedback, str):
            self.simulator: UserSimulator = TemplateFeedback(choice("feedback", feedback, FEEDBACK_STYLES))  # type: ignore[arg-type]
        elif isinstance(feedback, UserSimulator):
            self.simulator = feedback
        else:
            raise ConfigError("feedback", feedback, f"must be one of {list(FEEDBACK_STYLES)} or a UserSimulator")
        self.final_reward: FinalReward = choice("final_reward", final_reward, FINAL_REWARDS)  # type: ignore[assignment]
        self.gamma = float(number("gamma", gamma, minimum=0, maximum=1))
        self.begin([])

    def begin(self, item_names: Sequence[str]) -> None:
        """Start a task whose rubric items are called ``item_names`` (for the logs)."""
        self.item_names = list(item_names)
        self.attempt = 1
        self.scores: list[float] = []
        self.strict_scores: list[float] = []
        self.outcomes: list[list[bool]] = []
        self.feedback: str | None = None
        self.feedback_source: str | None = None
        self.passed = False
        self.finished = False

    def submit(self, rubric: Rubric, item_ids: Collection[str] = ()) -> Verdict:
        """Grade the current attempt's submission. Feedback that points at a cell or names one of
        ``item_ids`` (a simulator's text) is replaced by the template report."""
        self.scores.append(rubric.score)
        self.strict_scores.append(rubric.strict_score)
        self.outcomes.append(rubric.outcome)
        self.passed = rubric.score >= self.threshold
        self.finished = self.passed or self.attempt >= self.max_attempts
        if self.finished:
            self.feedback = None
            return Verdict(self.passed, True, None)
        submission = Submission(rubric, self.attempt, self.max_attempts, self.threshold)
        text = self.simulator.feedback(submission)
        self.feedback_source = "template" if isinstance(self.simulator, TemplateFeedback) else "simulator"
        if not isinstance(text, str) or not text.strip() or mentions_a_cell(text, item_ids):
            text = TemplateFeedback("diagnostic").feedback(submission)
            self.feedback_source = "template (the simulator's text was empty or pointed at a cell)"
        self.feedback = valid_text(text)  # an LLM's lone surrogates would break a tokenizer
        self.attempt += 1
        return Verdict(False, False, self.feedback)

    @property
    def attempts_used(self) -> int:
        """What Att counts: the passing attempt, K after a failure, else the current attempt."""
        if self.passed:
            return len(self.scores)
        return self.max_attempts if self.finished else self.attempt

    def reward(self) -> float:
        """The task's reward once finished (see the class docstring)."""
        if self.final_reward == "final":
            return self.strict_scores[-1] if self.strict_scores else 0.0
        earned = self.passed and self.strict_scores[-1] >= self.threshold
        return self.gamma ** (len(self.scores) - 1) if earned else 0.0

    def info(self, full: bool = True) -> dict[str, Any]:
        """The task's log: ``attempt``, ``max_attempts``, ``threshold``, ``scores`` (per attempt,
        AgencyBench's rubric score; the reward reads :attr:`strict_scores`, kept out of the log so
        that records written before it replay unchanged), ``passed``, ``finished``, ``attempts_used``; ``full`` adds ``rubric_items`` and ``rubrics``
        (per attempt, whether each item was met), ``feedback`` (the latest, None once finished)
        and its ``feedback_source``. The metrics of :mod:`ace_gym.feedback.metrics` read it."""
        log: dict[str, Any] = {
            "attempt": self.attempt,
            "max_attempts": self.max_attempts,
            "threshold": self.threshold,
            "scores": list(self.scores),
            "passed": self.passed,
            "finished": self.finished,
            "attempts_used": self.attempts_used,
        }
        if full:
            log.update(
                rubric_items=list(self.item_names),
                rubrics=[list(outcome) for outcome in self.outcomes],
                feedback=self.feedback,
                feedback_source=self.feedback_source,
            )
        return log
