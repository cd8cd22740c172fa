"""The eight question types, asked about a trajectory with answers computed from its structured log.

:func:`ask` returns a :class:`Question` (text, exact answer, evidence messages, the rounds it
names) or None when the trajectory cannot carry a well-posed question of that type. Our rules,
where the paper leaves them open:

* Count Frequency (Tool): occurrences of a name in the whole serialised tool result of one round
  (0/1 in concise, up to the number of lists in verbose). The asked name appears in some tool
  result of the history; the count is drawn uniformly among the counts that occur.
* Find Duplicates: yes and no drawn 50/50; a "no" name appears in exactly one of the two results.
* Find Target Offsets: the two names right after the first occurrence of a name in one round's
  result, reading a verbose result's lists in order as one list.
* Count Correctness: the number of values marked (correct) in one round's feedback; the count is
  drawn uniformly among the counts that occur.
* Count Frequency (Env): how many feedbacks list one categorical value (in its section); the count
  is drawn uniformly among the counts that occur (never 0).
* Find Round with Largest Value: the round whose guessed item has the highest number in the
  table's value section, over all rounds when that maximum is unique, else over a random window
  of rounds where it is unique.
* Weighted Summation: |W(i) - W(j)| with W = sum of section weight x values marked (correct); the
  difference is drawn uniformly among the differences of up to 256 random round pairs.
* Intersection, concise: the hidden target of the last game, asked only when that game is not
  solved, the intersection of its tool results is exactly the target and every result has at
  least ``min_list`` names; balanced, of any game of the history meeting the same conditions whose
  target sits at the aimed position of the history's names ordered by how often the tool results
  list them (ties by first listing), never the first unguessed name of the last tool result.
  Verbose: the intersection of one round's lists (rounds whose intersection has at most
  ``max_answer_items`` names preferred).
* Weighted Summation, balanced: the question states its own section weights (drawn from
  :data:`QUESTION_WEIGHTS`) for two rounds whose marks differ in at least two sections.
* Find Round with Largest Value, balanced: over the whole history of at least
  :data:`LARGEST_ROUNDS` rounds, in a numeric section whose unique highest value sits at the
  aimed position.

``evidence_position`` in [0, 1] picks the asked round of single-round questions by where its
evidence sits in the history (like needle depth); otherwise rounds are drawn uniformly.

Balanced answers (a :class:`Balance`, ``answers="balanced"`` in :mod:`ace_gym.longbench.samples`,
the training default): drawing a count "uniformly among the counts that occur" in one history
still concentrates the answers over histories on the counts every history has (verbose Count
Frequency (Env) was 1 in 85 % of samples), so a policy answering each type's most frequent gold
earned 0.19 (concise) and 0.33 (verbose). Balanced, a count question aims at a ``target`` drawn
per seed from :data:`BALANCED_TARGETS` and returns None (the sample draws a new history) when the
history cannot carry it, with no fallback to a count the history carries (that fallback made
verbose Count Correctness 0 in a third of the samples: issue 38); a type that no history of the
budget carries is then not asked (:mod:`ace_gym.longbench.samples`). Yes/no and 0/1
answers cannot be balanced below chance, so two questions ask about :data:`NAMES_ASKED` names
at once and count them: Find Duplicates ("how many of these names appear in both results", scored
as a number) and concise Count Frequency (Tool) ("how many of these names appear in the result").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ace_gym.longbench.engine import CORRECT, rendered_items, weighted_score
from ace_gym.longbench.question_types import (
    COUNT_CORRECTNESS,
    COUNT_FREQUENCY_ENV,
    COUNT_FREQUENCY_TOOL,
    FIND_DUPLICATES,
    FIND_TARGET_OFFSETS,
    INTERSECTION,
    LARGEST_VALUE,
    WEIGHTED_SUMMATION,
)
from ace_gym.longbench.trajectory import Trajectory

Answer = int | bool | str | list[str]


NAMES_ASKED: dict[str, int] = {FIND_DUPLICATES: 9, COUNT_FREQUENCY_TOOL: 9}
"""How many names a balanced Find Duplicates and a balanced concise Count Frequency (Tool) ask about."""
ROUNDS_ASKED: dict[str, int] = {"concise": 3, "verbose": 2}
"""How many rounds' correct marks a balanced Count Correctness question adds up, by format (always
that many: with fewer, how many rounds are asked told the likely totals; a verbose 32k history
holds 2 to 4 rounds)."""
VALUES_ASKED = 4
"""How many values of one section a balanced Count Frequency (Env) question counts together."""
LARGEST_ROUNDS = 5
"""The fewest rounds a balanced Find Round with Largest Value question is asked over."""
QUESTION_WEIGHTS = range(1, 10)
"""The section weights a balanced Weighted Summation question states, each drawn uniformly."""
INTERSECTION_POSITIONS = 7
"""A balanced concise Intersection aims at a position 1 to this of its target in the order of the
history's listed names (the last position meaning that one or later)."""
BALANCED_TARGETS: dict[tuple[str, str], range] = {
    (COUNT_FREQUENCY_TOOL, "concise"): range(NAMES_ASKED[COUNT_FREQUENCY_TOOL] + 1),
    (COUNT_FREQUENCY_TOOL, "verbose"): range(NAMES_ASKED[COUNT_FREQUENCY_TOOL] + 1),
    (FIND_DUPLICATES, "concise"): range(NAMES_ASKED[FIND_DUPLICATES] + 1),
    (FIND_DUPLICATES, "verbose"): range(NAMES_ASKED[FIND_DUPLICATES] + 1),
    (COUNT_CORRECTNESS, "concise"): range(16),
    (COUNT_CORRECTNESS, "verbose"): range(5),
    (COUNT_FREQUENCY_ENV, "concise"): range(10),
    (COUNT_FREQUENCY_ENV, "verbose"): range(7),
    (WEIGHTED_SUMMATION, "concise"): range(2, 19),
    (WEIGHTED_SUMMATION, "verbose"): range(2, 19),
    (INTERSECTION, "concise"): range(1, INTERSECTION_POSITIONS + 1),
    (LARGEST_VALUE, "concise"): range(100),
    (LARGEST_VALUE, "verbose"): range(100),
}
"""(question type, format) -> what a balanced question aims at, uniformly: for a count, counts
that at least a sixth of 32k histories carry (a feedback rarely marks 4 or 5 values correct; a
verbose 32k history holds 2 to 4 rounds); for Weighted Summation, differences under the weights
the question states (:func:`_weighted_difference`); for concise Intersection, the position of
the target in :meth:`_Context.listing_order`."""


@dataclass(frozen=True)
class Balance:
    """A balanced question's aim: the ``target`` (a count, a concise Intersection's position, a
    Largest Value's position; None for types without one)."""

    target: int | None


@dataclass(frozen=True)
class Question:
    """A question about a trajectory: ``evidence`` holds the indices (in the trajectory's
    messages) of the messages the answer is read from; ``rounds`` the official ``round`` /
    ``i_round`` / ``j_round`` fields; ``meta`` what was asked about (names, section, window);
    ``scored_as`` the type whose answer parsing and metric score it (the question's own type,
    or a number type for a balanced Find Duplicates, which counts names)."""

    question_type: str
    text: str
    answer: Answer
    evidence: tuple[int, ...]
    rounds: dict[str, int] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    scored_as: str = ""

    def __post_init__(self) -> None:
        if not self.scored_as:
            object.__setattr__(self, "scored_as", self.question_type)


@dataclass
class _Context:
    trajectory: Trajectory
    rng: np.random.Generator
    position: float | None
    min_list: int
    max_answer_items: int
    balance: Balance | None

    def __post_init__(self) -> None:
        self.table = self.trajectory.table
        self.rounds = self.trajectory.rounds
        self.offsets = np.concatenate([[0], np.cumsum(self.trajectory.message_tokens)])
        self.tool_rounds = [k for k, r in enumerate(self.rounds) if r.query is not None]

    def name(self, item: int) -> str:
        return self.table.names[int(item)]

    def pick(self, candidates: Sequence[int], message_of: Callable[[int], int]) -> int:
        """A round among ``candidates``: uniform, or the one whose evidence message starts nearest
        ``position`` of the history."""
        if self.position is None:
            return int(candidates[int(self.rng.integers(len(candidates)))])
        goal = self.position * self.trajectory.tokens
        return int(min(candidates, key=lambda k: abs(self.offsets[message_of(k)] - goal)))

    def present(self, k: int) -> np.ndarray:
        """Items appearing in round k's tool result."""
        query = self.rounds[k].query
        assert query is not None
        if self.trajectory.fmt == "concise":
            return query.intersection
        return np.logical_or.reduce([mask for _, _, mask in query.per_section])

    def occurrences(self, k: int) -> np.ndarray:
        """How often each item appears in round k's tool result."""
        query = self.rounds[k].query
        assert query is not None
        if self.trajectory.fmt == "concise":
            return query.intersection.astype(np.int64)
        return np.asarray(np.sum([mask for _, _, mask in query.per_section], axis=0, dtype=np.int64))

    def listing_order(self) -> dict[int, int]:
        """Each listed item's position (from 1) in the history's names ordered by how many tool
        results list them, ties by first listing: how a reader counting names ranks them."""
        listings = np.zeros(self.table.size, dtype=np.int64)
        first: dict[int, int] = {}
        for k in self.tool_rounds:
            for item in rendered_items(self.rounds[k].query, "concise").tolist():  # type: ignore[arg-type]
                first.setdefault(int(item), len(first))
            listings += self.occurrences(k)
        ordered = sorted(first, key=lambda item: (-listings[item], first[item]))
        return {item: position for position, item in enumerate(ordered, start=1)}

    def last_fresh_name(self) -> int | None:
        """The first item of the history's last tool result that no round guessed, if any."""
        if not self.tool_rounds:
            return None
        guessed = {r.guess for r in self.rounds}
        last = rendered_items(self.rounds[self.tool_rounds[-1]].query, "concise").tolist()  # type: ignore[arg-type]
        return next((int(item) for item in last if item not in guessed), None)

    def choice(self, values: Sequence[Any] | np.ndarray) -> Any:
        return values[int(self.rng.integers(len(values)))]

    def count(self, counts: Sequence[int] | np.ndarray) -> int | None:
        """The count to ask about among the distinct ``counts`` (sorted) this history carries:
        uniform without a balance; balanced, the target if carried, else None."""
        balance = self.balance
        if balance is None or balance.target is None:
            return int(self.choice(counts))
        return balance.target if balance.target in counts else None

    def names(self, inside: np.ndarray, outside: np.ndarray, asked: int) -> tuple[list[int], int] | None:
        """``asked`` items in random order, how many of them are drawn from the mask ``inside``
        (the balanced count, :meth:`count` over the counts both masks allow) and the rest from
        ``outside``; None when no allowed count is balanced."""
        n_in, n_out = int(np.count_nonzero(inside)), int(np.count_nonzero(outside))
        allowed = [k for k in range(asked + 1) if k <= n_in and asked - k <= n_out]
        if not allowed:
            return None
        count = self.count(allowed)
        if count is None:
            return None
        chosen = [*self.rng.choice(np.flatnonzero(inside), count, replace=False).tolist()]
        chosen += self.rng.choice(np.flatnonzero(outside), asked - count, replace=False).tolist()
        return [int(chosen[i]) for i in self.rng.permutation(asked)], count

    def listing(self, items: Sequence[int]) -> str:
        """``A, B, C and D``."""
        names = [self.name(i) for i in items]
        return f"{', '.join(names[:-1])} and {names[-1]}"


def ask(
    question_type: str,
    trajectory: Trajectory,
    rng: np.random.Generator,
    *,
    evidence_position: float | None = None,
    min_list: int = 2,
    max_answer_items: int = 50,
    balance: Balance | None = None,
) -> Question | None:
    """A question of ``question_type`` about ``trajectory`` (rules in the module docstring),
    balanced when ``balance`` is given, or None when it cannot carry one. Every random draw comes
    from ``rng``."""
    if not trajectory.rounds:
        return None
    context = _Context(trajectory, rng, evidence_position, min_list, max_answer_items, balance)
    return _ASKERS[question_type](context)


def _count_frequency_tool(c: _Context) -> Question | None:
    if not c.tool_rounds:
        return None
    k = c.pick(c.tool_rounds, c.trajectory.tool_message)  # type: ignore[arg-type]
    seen = np.logical_or.reduce([c.present(j) for j in c.tool_rounds])
    number = c.rounds[k].number
    evidence = (c.trajectory.tool_message(k),)
    if c.balance is not None:  # one name's count is 0/1 (concise) or small (verbose): count several names
        drawn = c.names(c.present(k) & seen, seen & ~c.present(k), NAMES_ASKED[COUNT_FREQUENCY_TOOL])
        if drawn is None:
            return None
        items, present = drawn
        return Question(
            COUNT_FREQUENCY_TOOL,
            f"How many of the names {c.listing(items)} appear in the tool result of round {number}?",
            present,
            evidence,  # type: ignore[arg-type]
            {"round": number},
            {"items": [c.name(i) for i in items]},
        )
    pool = np.flatnonzero(seen)
    counts = c.occurrences(k)[pool]
    count = c.count(np.unique(counts))
    if count is None:
        return None
    item = int(c.choice(pool[counts == count]))
    return Question(
        COUNT_FREQUENCY_TOOL,
        f"How many times does {c.name(item)} appear in the tool result of round {number}?",
        count,
        evidence,  # type: ignore[arg-type]
        {"round": number},
        {"item": c.name(item)},
    )


def _find_duplicates(c: _Context) -> Question | None:
    if len(c.tool_rounds) < 2:
        return None
    if c.balance is not None:
        return _count_duplicates(c)
    want = bool(c.rng.random() < 0.5)
    first = c.pick(c.tool_rounds, c.trajectory.tool_message)  # type: ignore[arg-type]
    for _ in range(32):
        other = int(c.choice([k for k in c.tool_rounds if k != first]))
        a, b = c.present(first), c.present(other)
        pool = np.flatnonzero(a & b if want else a ^ b)
        if len(pool):
            break
        first = int(c.choice(c.tool_rounds))
    else:
        return None
    i, j = sorted((first, other))
    item = int(c.choice(pool))
    ni, nj = c.rounds[i].number, c.rounds[j].number
    return Question(
        FIND_DUPLICATES,
        f"Does {c.name(item)} appear in the tool results of both round {ni} and round {nj}?",
        want,
        (c.trajectory.tool_message(i), c.trajectory.tool_message(j)),  # type: ignore[arg-type]
        {"i_round": ni, "j_round": nj},
        {"item": c.name(item)},
    )


def _count_duplicates(c: _Context) -> Question | None:
    """Balanced Find Duplicates: how many of :data:`NAMES_ASKED` names (each in at least one of
    the two results) appear in both."""
    first = c.pick(c.tool_rounds, c.trajectory.tool_message)  # type: ignore[arg-type]
    other = int(c.choice([k for k in c.tool_rounds if k != first]))
    i, j = sorted((first, other))
    a, b = c.present(i), c.present(j)
    drawn = c.names(a & b, a ^ b, NAMES_ASKED[FIND_DUPLICATES])
    if drawn is None:
        return None
    items, both = drawn
    ni, nj = c.rounds[i].number, c.rounds[j].number
    return Question(
        FIND_DUPLICATES,
        f"How many of the names {c.listing(items)} appear in the tool results of both round {ni} and round {nj}? "
        "Answer with a number.",
        both,
        (c.trajectory.tool_message(i), c.trajectory.tool_message(j)),  # type: ignore[arg-type]
        {"i_round": ni, "j_round": nj},
        {"items": [c.name(item) for item in items]},
        scored_as=COUNT_FREQUENCY_TOOL,
    )


def _find_target_offsets(c: _Context) -> Question | None:
    fmt = c.trajectory.fmt
    candidates = [k for k in c.tool_rounds if len(rendered_items(c.rounds[k].query, fmt)) >= 3]  # type: ignore[arg-type]
    if not candidates:
        return None
    k = c.pick(candidates, c.trajectory.tool_message)  # type: ignore[arg-type]
    order = rendered_items(c.rounds[k].query, fmt)  # type: ignore[arg-type]
    items, first = np.unique(order, return_index=True)
    eligible = items[first <= len(order) - 3]
    item = int(c.choice(eligible))
    at = int(first[np.searchsorted(items, item)])
    number = c.rounds[k].number
    how = " Read the result's lists in order as one list." if fmt == "verbose" else ""
    return Question(
        FIND_TARGET_OFFSETS,
        f"In the tool result of round {number}, which two names come right after the first occurrence of "
        f"{c.name(item)}?{how}",
        [c.name(order[at + 1]), c.name(order[at + 2])],
        (c.trajectory.tool_message(k),),  # type: ignore[arg-type]
        {"round": number},
        {"item": c.name(item)},
    )


def _count_correctness(c: _Context) -> Question | None:
    counts = np.array([r.feedback.correct_marks for r in c.rounds])
    if c.balance is not None and c.position is None:
        return _count_correct_rounds(c, counts)
    if c.position is None:
        count = c.count(np.unique(counts))
        if count is None:
            return None
        k = int(c.choice(np.flatnonzero(counts == count)))
    else:
        k = c.pick(range(len(c.rounds)), c.trajectory.feedback_message)  # type: ignore[arg-type]
    number = c.rounds[k].number
    return Question(
        COUNT_CORRECTNESS,
        f"How many values are marked ({CORRECT}) in the feedback of round {number}?",
        int(counts[k]),
        (c.trajectory.feedback_message(k),),
        {"round": number},
    )


def _count_correct_rounds(c: _Context, counts: np.ndarray) -> Question | None:
    """Balanced Count Correctness: the values marked correct in the feedback of
    :data:`ROUNDS_ASKED` rounds together (one feedback marks 0, 1 or 2 values correct in most
    rounds, so one round's count is nearly a constant)."""
    rounds, asked = len(counts), ROUNDS_ASKED[c.trajectory.fmt]
    if rounds < asked:
        return None
    by_total: dict[int, list[tuple[int, ...]]] = {}
    for _ in range(256):
        chosen = tuple(sorted(int(k) for k in c.rng.choice(rounds, asked, replace=False)))
        by_total.setdefault(int(counts[list(chosen)].sum()), []).append(chosen)
    total = c.count(sorted(by_total))
    if total is None:
        return None
    chosen = c.choice(by_total[total])
    numbers = [c.rounds[k].number for k in chosen]
    if len(numbers) == 1:
        scope = f"round {numbers[0]}"
    else:
        scope = f"rounds {', '.join(map(str, numbers[:-1]))} and {numbers[-1]} together"
    return Question(
        COUNT_CORRECTNESS,
        f"How many values are marked ({CORRECT}) in the feedback of {scope}?",
        total,
        tuple(c.trajectory.feedback_message(k) for k in chosen),
        {"round": numbers[0]} if len(numbers) == 1 else {},
        {"rounds": numbers},
    )


def _count_frequency_env(c: _Context) -> Question | None:
    guesses = np.array([r.guess for r in c.rounds])
    if c.balance is not None:
        return _count_values_env(c, guesses)
    pairs: list[tuple[str, str, int]] = []
    for spec in c.table.sections:
        if spec.kind == "categorical":
            counts = c.table.value_matrix(spec.name)[guesses].sum(axis=0)
            vocab = c.table.vocab[spec.name]
            pairs.extend((spec.name, vocab[j], int(counts[j])) for j in np.flatnonzero(counts))
    count = c.count(sorted({n for _, _, n in pairs}))
    if count is None:
        return None
    section, value, _ = c.choice([p for p in pairs if p[2] == count])
    holders = np.flatnonzero(c.table.has_all(section, (value,))[guesses])
    return Question(
        COUNT_FREQUENCY_ENV,
        f"Across the feedback of all rounds, how many times is the value {value} listed in section {section}?",
        count,
        tuple(c.trajectory.feedback_message(int(k)) for k in holders),
        {},
        {"section": section, "value": value},
    )


def _count_values_env(c: _Context, guesses: np.ndarray) -> Question | None:
    """Balanced Count Frequency (Env): how many times :data:`VALUES_ASKED` values of one
    categorical section are listed in all, over every feedback (a history's few rounds list one
    value once or twice, so one value's count is nearly always 1); random sets of values until
    their total is the target (filling the set greedily reached a total of 3 in 4 of 53 verbose
    samples against 14 for 2, since it needed one value listed three times)."""
    listed_counts = {
        spec.name: c.table.value_matrix(spec.name)[guesses].sum(axis=0)
        for spec in c.table.sections
        if spec.kind == "categorical" and len(c.table.vocab[spec.name]) >= VALUES_ASKED
    }
    target = c.balance.target if c.balance is not None else None
    found: tuple[str, list[int]] | None = None
    sections = sorted(listed_counts)
    for _ in range(512 if sections else 0):
        section = str(c.choice(sections))
        counts = listed_counts[section]
        columns = [int(j) for j in c.rng.choice(len(counts), VALUES_ASKED, replace=False)]
        if target is None or int(counts[columns].sum()) == target:
            found = (section, columns)
            break
    if found is None:
        return None
    section, columns = found
    vocab = c.table.vocab[section]
    values = [vocab[j] for j in columns]
    matrix = c.table.value_matrix(section)[guesses][:, columns]
    holders = np.flatnonzero(matrix.any(axis=1))
    listed = f"{', '.join(values[:-1])} and {values[-1]}"
    return Question(
        COUNT_FREQUENCY_ENV,
        f"Across the feedback of all rounds, how many times in total are the values {listed} listed in section "
        f"{section}?",
        int(matrix.sum()),
        tuple(c.trajectory.feedback_message(int(k)) for k in holders),
        {},
        {"section": section, "values": values},
    )


def _largest_value(c: _Context) -> Question | None:
    rounds = len(c.rounds)
    if rounds < 2:
        return None
    if c.balance is not None:
        return _largest_at(c)
    section = c.table.value_section
    values = c.table.numbers[section][[r.guess for r in c.rounds]]
    window = (0, rounds - 1)
    if np.count_nonzero(values == values.max()) != 1:
        for _ in range(64):
            length = int(c.rng.integers(2, rounds + 1))
            start = int(c.rng.integers(0, rounds - length + 1))
            part = values[start : start + length]
            if np.count_nonzero(part == part.max()) == 1:
                window = (start, start + length - 1)
                break
        else:
            changes = np.flatnonzero(values[1:] != values[:-1])
            if not len(changes):
                return None
            start = int(c.choice(changes))
            window = (start, start + 1)
    start, end = window
    best = start + int(np.argmax(values[start : end + 1]))
    numbers = (c.rounds[start].number, c.rounds[end].number)
    scope = "" if window == (0, rounds - 1) else f" among rounds {numbers[0]} to {numbers[1]}"
    return Question(
        LARGEST_VALUE,
        f"Which round's feedback shows the highest {section}{scope}? Answer with the round number.",
        c.rounds[best].number,
        tuple(c.trajectory.feedback_message(k) for k in range(start, end + 1)),
        {"i_round": numbers[0], "j_round": numbers[1]},
        {"section": section},
    )


def _largest_at(c: _Context) -> Question | None:
    """Balanced Find Round with Largest Value: over the whole history, in any numeric section whose
    highest value is unique and sits in the round at ``balance.target`` percent of the history
    (the investigator's first guesses are the extreme ones, so the value section's highest round
    was the first or last one in half the samples); None when the history is shorter than
    :data:`LARGEST_ROUNDS` rounds or no section peaks there (no fallback: in a short history any
    round is a good guess)."""
    rounds = len(c.rounds)
    if c.balance is None or c.balance.target is None or rounds < LARGEST_ROUNDS:
        return None
    at = c.balance.target * rounds // 100
    guesses = [r.guess for r in c.rounds]
    peaked = []
    for spec in c.table.sections:
        if spec.kind == "numeric":
            values = c.table.numbers[spec.name][guesses]
            if np.count_nonzero(values == values.max()) == 1 and int(np.argmax(values)) == at:
                peaked.append(spec.name)
    if not peaked:
        return None
    section = str(c.choice(peaked))
    first, last = c.rounds[0].number, c.rounds[-1].number
    return Question(
        LARGEST_VALUE,
        f"Which round's feedback shows the highest {section}? Answer with the round number.",
        c.rounds[at].number,
        tuple(c.trajectory.feedback_message(k) for k in range(rounds)),
        {"i_round": first, "j_round": last},
        {"section": section},
    )


def _weighted_summation(c: _Context) -> Question | None:
    rounds = len(c.rounds)
    if rounds < 2:
        return None
    if c.balance is not None:
        return _weighted_difference(c)
    scores = [weighted_score(c.table, r.feedback) for r in c.rounds]
    by_difference: dict[int, list[tuple[int, int]]] = {}
    for _ in range(256):
        i, j = (int(x) for x in c.rng.choice(rounds, 2, replace=False))
        by_difference.setdefault(abs(scores[i] - scores[j]), []).append((min(i, j), max(i, j)))
    difference = c.count(sorted(by_difference))
    if difference is None:
        return None
    i, j = c.choice(by_difference[difference])
    return _weighted_question(c, i, j, [s.weight for s in c.table.sections], difference)


def _weighted_difference(c: _Context) -> Question | None:
    """Balanced Weighted Summation: the question states weights of its own, drawn from
    :data:`QUESTION_WEIGHTS`, for a random pair of rounds whose correct marks differ in at least
    two sections (else the answer is one stated weight), until the difference is the target (with
    the table's fixed weights a verbose history's differences took five values, so a constant
    answer earned 0.24 of them)."""
    # a feedback has one section per table section, in the table's order (engine.give_feedback)
    marks = np.array([[s.marks.count(CORRECT) for s in r.feedback.sections] for r in c.rounds])
    pairs = [
        (i, j)
        for i in range(len(marks))
        for j in range(i + 1, len(marks))
        if np.count_nonzero(marks[i] != marks[j]) >= 2
    ]
    for _ in range(256 if pairs else 0):
        i, j = pairs[int(c.rng.integers(len(pairs)))]
        weights = c.rng.integers(QUESTION_WEIGHTS.start, QUESTION_WEIGHTS.stop, size=marks.shape[1])
        difference = abs(int(weights @ (marks[i] - marks[j])))
        if difference == c.balance.target:  # type: ignore[union-attr]
            return _weighted_question(c, i, j, [int(w) for w in weights], difference)
    return None


def _weighted_question(c: _Context, i: int, j: int, weights: Sequence[int], difference: int) -> Question:
    """The Weighted Summation question on rounds ``i`` < ``j`` under ``weights`` (one per table section)."""
    stated = ", ".join(f"{s.name} {w}" for s, w in zip(c.table.sections, weights, strict=True))
    ni, nj = c.rounds[i].number, c.rounds[j].number
    return Question(
        WEIGHTED_SUMMATION,
        f"Score a round's feedback as the sum, over its sections, of the section's weight times the number of "
        f"its values marked ({CORRECT}). Weights: {stated}. What is the absolute difference between the "
        f"scores of round {ni} and round {nj}?",
        difference,
        (c.trajectory.feedback_message(i), c.trajectory.feedback_message(j)),
        {"i_round": ni, "j_round": nj},
    )


def _intersection(c: _Context) -> Question | None:
    if c.trajectory.fmt == "verbose":
        return _verbose_intersection(c)
    if c.balance is not None and c.balance.target is not None:
        return _unsolved_game(c, c.balance)
    last = c.rounds[-1]
    if last.ends_game:
        return None
    listed = _pinning_results(c, last.game)
    if listed is None:
        return None
    start = next(r.number for r in c.rounds if r.game == last.game)
    return Question(
        INTERSECTION,
        f"The game that started in round {start} is not solved yet. Which {c.table.noun} is its hidden target? "
        "It is the only name that appears in every tool result of that game.",
        c.name(last.target),
        tuple(c.trajectory.tool_message(k) for k in listed),  # type: ignore[misc]
        {"round": last.number},
        {"game_start": start},
    )


def _pinning_results(c: _Context, game: int) -> list[int] | None:
    """The tool rounds of ``game`` when its target was never guessed, the intersection of their
    results is exactly the target and every result lists at least ``min_list`` names; else None."""
    rounds = [k for k, r in enumerate(c.rounds) if r.game == game]
    if any(c.rounds[k].feedback.correct for k in rounds):
        return None
    listed = [k for k in rounds if c.rounds[k].query is not None]
    if not listed:
        return None
    masks = [c.rounds[k].query.intersection for k in listed]  # type: ignore[union-attr]
    common = np.logical_and.reduce(masks)
    if np.count_nonzero(common) != 1 or not common[c.rounds[rounds[0]].target]:
        return None
    if min(int(np.count_nonzero(m)) for m in masks) < c.min_list:
        return None
    return listed


def _unsolved_game(c: _Context, balance: Balance) -> Question | None:
    """Balanced concise Intersection: the target of any game of the history that ended, or was cut,
    without it being guessed (not only the last game), among those whose target sits at position
    ``balance.target`` of :meth:`_Context.listing_order` (:data:`INTERSECTION_POSITIONS` or
    later for the last), uniformly; never the first unguessed name of the last tool result. A
    game's target is listed in every result of its game, so it is the most listed name of most
    short histories: with a fallback to any game (or without the aim) the most listed name
    answered three quarters of the questions at 4096 tokens; None when no game fits."""
    order = c.listing_order()
    giveaway = c.last_fresh_name()
    aim = balance.target
    games: list[tuple[int, list[int]]] = []
    for game in sorted({r.game for r in c.rounds}):
        listed = _pinning_results(c, game)
        if listed is None:
            continue
        target = c.rounds[listed[0]].target
        position = order[target]
        if target != giveaway and (position == aim or (aim == INTERSECTION_POSITIONS and position > aim)):
            games.append((game, listed))
    if not games:
        return None
    game, listed = c.choice(games)
    played = [r for r in c.rounds if r.game == game]
    start = played[0].number
    return Question(
        INTERSECTION,
        f"In the game that started in round {start}, the hidden target was never guessed. Which {c.table.noun} "
        "was it? It is the only name that appears in every tool result of that game.",
        c.name(played[0].target),
        tuple(c.trajectory.tool_message(k) for k in listed),  # type: ignore[misc]
        {"round": played[-1].number},
        {"game_start": start},
    )


def _verbose_intersection(c: _Context) -> Question | None:
    if not c.tool_rounds:
        return None
    sizes = {k: int(np.count_nonzero(c.rounds[k].query.intersection)) for k in c.tool_rounds}  # type: ignore[union-attr]
    small = [k for k in c.tool_rounds if sizes[k] <= c.max_answer_items]
    k = c.pick(small or c.tool_rounds, c.trajectory.tool_message)  # type: ignore[arg-type]
    number = c.rounds[k].number
    return Question(
        INTERSECTION,
        f"Which names appear in every list of the tool result of round {number}?",
        [c.name(i) for i in np.flatnonzero(c.rounds[k].query.intersection).tolist()],  # type: ignore[union-attr]
        (c.trajectory.tool_message(k),),  # type: ignore[arg-type]
        {"round": number},
    )


_ASKERS: dict[str, Callable[[_Context], Question | None]] = {
    COUNT_FREQUENCY_TOOL: _count_frequency_tool,
    FIND_DUPLICATES: _find_duplicates,
    FIND_TARGET_OFFSETS: _find_target_offsets,
    COUNT_CORRECTNESS: _count_correctness,
    COUNT_FREQUENCY_ENV: _count_frequency_env,
    LARGEST_VALUE: _largest_value,
    WEIGHTED_SUMMATION: _weighted_summation,
    INTERSECTION: _intersection,
}
