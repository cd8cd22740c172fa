"""AgencyBench's feedback rounds on an ACE env: grade each submission, give feedback, let the agent retry."""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym

from ace_gym.envs import AceEnv
from ace_gym.errors import ConfigError
from ace_gym.feedback.rounds import ACE_THRESHOLD, TRAINING_REWARD, Rounds
from ace_gym.feedback.rubric import cells_of, grade, item_names
from ace_gym.feedback.scenario import ScenarioEnv
from ace_gym.feedback.simulator import UserSimulator


class FeedbackRounds(gym.Wrapper[Any, Any, Any, Any], gym.utils.RecordConstructorArgs):
    """Up to ``max_attempts`` submissions per episode, with feedback on each that falls short.

    ## Submission
    The wrapped env's episode ending: a ``done`` call, or its step budget running out (the core
    env's ``max_steps``, or :class:`StepBudget`'s ``max_turns`` when it wraps a chat stack). The
    grid is graded on the rubric of :mod:`ace_gym.feedback.rubric`: one item per hidden slot
    (filled with a candidate that meets its own slot rules) and one per global rule; the score
    is the share of items met.

    ## Retry
    A score ``>= threshold`` passes and ends the episode (default 1.0, ACE's own verdict: every
    rubric item met; ``threshold="paper"`` is AgencyBench's 0.6, at which a grid with a slot that
    breaks its own rules passes); so does the last attempt. Otherwise the
    grid is kept as the agent left it, the feedback (``feedback``: ``"names"``, ``"diagnostic"``,
    ``"directive"`` or a :class:`~ace_gym.feedback.simulator.UserSimulator`; it never names a
    cell) becomes the next observation through the stack's ``resume`` (a user message for a chat
    stack, the observation after ``done`` for the tool-call env), the step budget starts again
    and the episode goes on. Budgets the agent spent stay spent.

    ## Reward
    0 on every step but the last, where it is the verdict: ``gamma ** (j - 1)`` for a pass at
    attempt j, 0 for a failure (``final_reward="pass_discount"``, the default); or, not for
    training, the last attempt's strict score (``"final"``: the rubric's share met, the global
    rules counting only once every hidden slot is filled, which pays a grid filled without
    planning 0.91-0.93). Floor: 0 for ``done`` at once; a random slot-valid grid earns its pass
    rate (0.10-0.25 on the bundled data). AgencyBench's rubric score, which pays an empty grid the
    upper bounds it meets vacuously, stays in ``info`` (``scores``) and in the metrics (S_avg) for
    comparison with the paper; it never passes at the default threshold.

    ## Information
    Every step (and reset): ``feedback_rounds`` = the log of :meth:`Rounds.info
    <ace_gym.feedback.rounds.Rounds.info>`: ``attempt``, ``max_attempts``, ``threshold``,
    ``scores`` per attempt (AgencyBench's rubric score; the reward reads the verdict or the strict score),
    ``passed``, ``finished``, ``attempts_used``; on a step that submitted,
    also ``rubrics`` per attempt (``rubric_items`` names the items, cells included: for
    evaluators, never shown to the agent), ``feedback`` and ``feedback_source``. The wrapped
    env's ``score`` (ACE's 0/1) stays as it reports it.

    ``step`` never raises for an action. Wrap the outermost layer of an ACE stack (an
    ``ACE-Scenario`` env runs its own rounds per stage and is refused). docs/feedback_rounds.md.
    """

    def __init__(
        self,
        env: gym.Env,
        max_attempts: int = 2,
        threshold: float | str = ACE_THRESHOLD,
        feedback: str | UserSimulator = "diagnostic",
        final_reward: str = TRAINING_REWARD,
        gamma: float = 0.9,
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self,
            max_attempts=max_attempts,
            threshold=threshold,
            feedback=feedback,
            final_reward=final_reward,
            gamma=gamma,
            _disable_deepcopy=True,  # a simulator may hold an LLM engine
        )
        rounds = Rounds(max_attempts, threshold, feedback, final_reward, gamma)
        core = env.unwrapped
        if not isinstance(core, AceEnv):
            raise ConfigError("env", env, "FeedbackRounds wraps an ACE stack (its unwrapped env must be an AceEnv)")
        if isinstance(core, ScenarioEnv):
            raise ConfigError("env", env, "a scenario runs its own feedback rounds per stage: set max_attempts on it")
        gym.Wrapper.__init__(self, env)
        self.rounds = rounds
        self._resume = env.get_wrapper_attr("resume")
        self._hidden_ids: frozenset[str] = frozenset()
        self._started = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        compiled = self._core().compiled
        self._hidden_ids = frozenset(item for slot in compiled.slots for item in slot.candidate_ids)
        self.rounds.begin(item_names(compiled, range(compiled.hidden_count), compiled.global_rules))
        self._started = True
        info["feedback_rounds"] = self.rounds.info(full=False)
        return observation, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        if not self._started:
            return self.env.step(action)  # the env's own ResetNeeded
        observation, _, terminated, truncated, info = self.env.step(action)
        if self.rounds.finished or not (terminated or truncated):  # between submissions, or after the end
            info["feedback_rounds"] = self.rounds.info(full=False)
            return observation, 0.0, terminated, truncated, info
        core = self._core()
        verdict = self.rounds.submit(grade(core.compiled, cells_of(core.compiled, core.grid)), self._hidden_ids)
        info["feedback_rounds"] = self.rounds.info()
        if verdict.finished:
            return observation, self.rounds.reward(), terminated, truncated, info
        observation = self._resume(verdict.feedback)
        if "messages" in info:  # a chat stack: the conversation now ends with the feedback
            info["messages"] = self.env.get_wrapper_attr("conversation")
        return observation, 0.0, False, False, info

    def _core(self) -> AceEnv:
        core = self.env.unwrapped
        assert isinstance(core, AceEnv)  # checked in __init__
        return core
