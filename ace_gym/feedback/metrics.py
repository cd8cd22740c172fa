"""AgencyBench's attempt metrics as pure functions over episode records (docs/feedback_rounds.md).

A *task* is what one pass/fail decision is made on: an episode under
:class:`~ace_gym.feedback.FeedbackRounds`, one stage of an ``ACE-Scenario`` episode, or a plain
episode (one attempt, threshold 1.0). :func:`tasks_of` reads a record's tasks as :class:`Attempts`:

* ``record["feedback_rounds"]`` (the wrapper's last ``info["feedback_rounds"]``): one task;
* ``record["scenario"]["stages_log"]`` (the scenario env's last ``info["scenario"]``): one task per
  stage opened (a stage never submitted counts as one failed attempt scored 0);
* otherwise one attempt scored ``record["score"]``.

Each of those mappings holds ``scores`` (the rubric score of every attempt made, in [0, 1]),
``max_attempts`` (K) and ``threshold`` (T). A task *passes at attempt j* when its j-th score is the
first one ``>= T`` (a score exactly at the threshold passes).

The paper's definitions (scores as shares in [0, 1]; the paper prints them as percentages):

* ``s_avg``: the mean score, of the ``"final"`` attempt or the ``"best"`` one (named);
* ``att`` = M_att / M: attempts used per task, j on a pass at attempt j and K on a failure;
* ``pass_within_attempts(k)``: the share of tasks passed at an attempt <= k, and
  ``pass_within_feedback_rounds(f)`` = ``pass_within_attempts(f + 1)``; summaries write it as
  ``pass_within@k`` ("within k attempts", :data:`PASS_CONVENTION`). The paper calls it Pass@k,
  but in ace-gym ``pass@k`` is always the unbiased estimator over samples (:mod:`ace_gym.stats`);
* ``rise`` = (pass_within@K - pass_within@1) / pass_within@1 (the paper's K = 2), None when
  pass_within@1 is 0;
* ``e_att`` = S / Att and ``e_tok`` = S / Tok, Tok in millions of tokens.

Usage per episode (``turns`` as :func:`ace_gym.stats.episode_turns` counts them, ``tokens``,
``wall_time``) is read from ``record["usage"]``. Tokens
are the engine's reported prompt + completion tokens summed over turns; a record without them
(scripted policies) gets a proxy: every assistant message counted as its completion plus the whole
conversation before it as its prompt, with :class:`~ace_gym.runs.tokens.ApproxTokenizer`.
:func:`tokens` says which (``"engine"``, ``"proxy"`` or ``"mixed"``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ace_gym.errors import ConfigError
from ace_gym.runs.tokens import ApproxTokenizer, Tokenizer, message_tokens
from ace_gym.stats import episode_turns, mean

Which = Literal["final", "best"]
TokenSource = Literal["engine", "proxy", "mixed"]
PASS_CONVENTION = "within k attempts"
"""What ``pass_within@k`` means in summaries: passed at attempt k or earlier (k - 1 feedback rounds)."""
PASS_WITHIN = "pass_within@"
"""The prefix of AgencyBench's "passed within k attempts" keys (``pass_within@1`` ...)."""


def pass_within_key(k: int) -> str:
    """The summary key of "passed within ``k`` attempts": ``pass_within@k``."""
    return f"{PASS_WITHIN}{k}"


TOKENS_PER_UNIT = 1e6
"""E_tok divides by tokens in millions, as the paper does."""


@dataclass(frozen=True)
class Attempts:
    """One task's attempts: ``scores`` in [0, 1] in attempt order (1 to ``max_attempts`` of them),
    ``max_attempts`` (K >= 1) and the pass ``threshold``. ConfigError for anything else."""

    scores: tuple[float, ...]
    max_attempts: int
    threshold: float

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int) or self.max_attempts < 1:
            raise ConfigError("max_attempts", self.max_attempts, "must be an integer >= 1")
        if not 1 <= len(self.scores) <= self.max_attempts:
            raise ConfigError("scores", self.scores, f"must hold 1 to {self.max_attempts} attempt scores")
        if not all(0.0 <= s <= 1.0 for s in self.scores):
            raise ConfigError("scores", self.scores, "every score must be in [0, 1]")
        if not 0.0 <= self.threshold <= 1.0:
            raise ConfigError("threshold", self.threshold, "must be in [0, 1]")

    @property
    def passed_at(self) -> int | None:
        """The first attempt (1-based) whose score reaches the threshold, or None."""
        return next((j for j, score in enumerate(self.scores, start=1) if score >= self.threshold), None)

    @property
    def attempts_used(self) -> int:
        """What Att counts: j on a pass at attempt j, K on a failure."""
        return self.passed_at or self.max_attempts

    def score(self, which: Which = "final") -> float:
        """The final attempt's score, or the best attempt's."""
        if which == "final":
            return self.scores[-1]
        if which == "best":
            return max(self.scores)
        raise ConfigError("which", which, "must be 'final' or 'best'")

    @classmethod
    def from_mapping(cls, attempts: Mapping[str, Any]) -> Attempts:
        """From ``{"scores", "max_attempts", "threshold"}`` as the wrappers' info holds it."""
        return cls(
            tuple(float(s) for s in attempts["scores"]), int(attempts["max_attempts"]), float(attempts["threshold"])
        )


def tasks_of(record: Mapping[str, Any]) -> list[Attempts]:
    """The tasks of one episode record (see the module docstring)."""
    if "feedback_rounds" in record:
        return [Attempts.from_mapping(record["feedback_rounds"])]
    if "scenario" in record:
        return [_stage_attempts(stage) for stage in record["scenario"]["stages_log"]]
    return [Attempts((float(record["score"]),), 1, 1.0)]


def _stage_attempts(stage: Mapping[str, Any]) -> Attempts:
    return Attempts.from_mapping(stage if stage["scores"] else {**stage, "scores": [0.0]})


def all_tasks(records: Iterable[Mapping[str, Any]]) -> list[Attempts]:
    return [task for record in records for task in tasks_of(record)]


# -- scores and attempts ------------------------------------------------------------------------


def s_avg(tasks: Sequence[Attempts], which: Which = "final") -> float:
    """S_avg: the mean final (or best) attempt score; 0.0 for no tasks."""
    return mean([task.score(which) for task in tasks])


def att(tasks: Sequence[Attempts]) -> float:
    """Att = M_att / M: the mean attempts used (K for a failed task); 0.0 for no tasks."""
    return mean([task.attempts_used for task in tasks])


def pass_within_attempts(tasks: Sequence[Attempts], k: int) -> float:
    """The share of tasks passed at attempt ``k`` or earlier. ConfigError when ``k`` < 1 or
    exceeds a task's K (what a task would have done with more attempts is unknown)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError("k", k, "must be an integer >= 1")
    if any(k > task.max_attempts for task in tasks):
        raise ConfigError("k", k, f"exceeds the attempts allowed ({min(t.max_attempts for t in tasks)})")
    return mean([float(task.passed_at is not None and task.passed_at <= k) for task in tasks])


def pass_within_feedback_rounds(tasks: Sequence[Attempts], rounds: int) -> float:
    """The share of tasks passed after at most ``rounds`` feedback rounds: attempt ``rounds + 1``."""
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 0:
        raise ConfigError("rounds", rounds, "must be an integer >= 0")
    return pass_within_attempts(tasks, rounds + 1)


def rise(pass_first: float, pass_later: float) -> float | None:
    """Rise = (pass_later - pass_first) / pass_first (shares passed within some attempts); None
    when pass_first is 0 (undefined)."""
    return None if pass_first == 0 else (pass_later - pass_first) / pass_first


def e_att(score: float, attempts: float) -> float:
    """Attempt efficiency S / Att (in the unit of ``score``)."""
    if attempts <= 0:
        raise ConfigError("attempts", attempts, "must be > 0")
    return score / attempts


def e_tok(score: float, tokens: float, per: float = TOKENS_PER_UNIT) -> float | None:
    """Token efficiency S / Tok with Tok = ``tokens / per`` (millions by default); None for 0 tokens."""
    if per <= 0:
        raise ConfigError("per", per, "must be > 0")
    return None if tokens <= 0 else score / (tokens / per)


# -- usage --------------------------------------------------------------------------------------


def turns(records: Sequence[Mapping[str, Any]]) -> float:
    """Mean policy turns per episode (:func:`ace_gym.stats.episode_turns`)."""
    return mean(float(episode_turns(record)) for record in records)


def wall_time(records: Sequence[Mapping[str, Any]]) -> float:
    """Mean wall-clock seconds per episode."""
    return mean([float(record.get("usage", {}).get("time_s", 0.0)) for record in records])


@dataclass(frozen=True)
class TokenCount:
    """Mean tokens per episode and where they come from (``"engine"``, ``"proxy"`` or ``"mixed"``)."""

    mean: float
    source: TokenSource


def episode_tokens(record: Mapping[str, Any], tokenizer: Tokenizer | None = None) -> tuple[int, TokenSource]:
    """One episode's tokens: the engine's prompt + completion usage when it reported any, else the
    proxy over ``record["messages"]`` (see the module docstring)."""
    usage = record.get("usage", {})
    reported = int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))
    if reported > 0:
        return reported, "engine"
    counter = tokenizer or ApproxTokenizer()
    history = total = 0
    for message in record.get("messages", ()):
        cost = message_tokens(counter, message)
        if message.get("role") == "assistant":
            total += history + cost
        history += cost
    return total, "proxy"


def tokens(records: Sequence[Mapping[str, Any]], tokenizer: Tokenizer | None = None) -> TokenCount:
    """Mean tokens per episode with their source (``"proxy"`` for no records)."""
    counted = [episode_tokens(record, tokenizer) for record in records]
    sources = {source for _, source in counted}
    source: TokenSource = sources.pop() if len(sources) == 1 else ("mixed" if sources else "proxy")
    return TokenCount(mean([float(n) for n, _ in counted]), source)


# -- summaries ----------------------------------------------------------------------------------


def agency_summary(
    records: Sequence[Mapping[str, Any]], which: Which = "final", tokenizer: Tokenizer | None = None
) -> dict[str, Any]:
    """The paper's view of a group of episode records, pooled over their tasks.

    Keys: ``tasks``, ``s_avg`` (and ``s_avg_of``: ``which``), ``att``, ``pass_within@1`` ...
    ``pass_within@K`` (K = the smallest max_attempts; :data:`PASS_CONVENTION`), ``rise``
    (pass_within@K over pass_within@1; None when undefined or K = 1), ``e_att``, ``e_tok`` (S_avg per million tokens; None without
    tokens), ``turns``, ``tokens``, ``tokens_source``, ``wall_time_s``. Shares are in [0, 1].
    """
    tasks = all_tasks(records)
    k_max = min((task.max_attempts for task in tasks), default=1)
    score, attempts = s_avg(tasks, which), att(tasks)
    passes = {pass_within_key(k): pass_within_attempts(tasks, k) for k in range(1, k_max + 1)}
    counted = tokens(records, tokenizer)
    return {
        "tasks": len(tasks),
        "s_avg": score,
        "s_avg_of": which,
        "att": attempts,
        **passes,
        "pass_convention": PASS_CONVENTION,
        "rise": rise(passes[pass_within_key(1)], passes[pass_within_key(k_max)]) if k_max > 1 else None,
        "e_att": e_att(score, attempts) if tasks else None,
        "e_tok": e_tok(score, counted.mean),
        "turns": turns(records),
        "tokens": counted.mean,
        "tokens_source": counted.source,
        "wall_time_s": wall_time(records),
    }


def stage_summary(records: Sequence[Mapping[str, Any]], which: Which = "final") -> list[dict[str, Any]]:
    """Per stage position of scenario records: ``stage`` (1-based), ``tasks``, ``s_avg``, ``att``,
    ``pass_within@1`` ... ``pass_within@K``. Records without a scenario are ignored."""
    by_stage: dict[int, list[Attempts]] = {}
    for record in records:
        for position, stage in enumerate(record.get("scenario", {}).get("stages_log", ()), start=1):
            by_stage.setdefault(position, []).append(_stage_attempts(stage))
    out = []
    for position, tasks in sorted(by_stage.items()):
        k_max = min(task.max_attempts for task in tasks)
        out.append(
            {
                "stage": position,
                "tasks": len(tasks),
                "s_avg": s_avg(tasks, which),
                "att": att(tasks),
                **{pass_within_key(k): pass_within_attempts(tasks, k) for k in range(1, k_max + 1)},
            }
        )
    return out


def scenario_pass(records: Sequence[Mapping[str, Any]], k: int) -> float:
    """The share of scenario records whose every stage passed within ``k`` attempts."""
    scenarios = [tasks_of(record) for record in records if "scenario" in record]
    return mean(float(pass_within_attempts(stages, k) == 1.0) for stages in scenarios)
