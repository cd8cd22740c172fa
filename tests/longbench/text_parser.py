"""An independent reader of rendered AgentLongBench histories, for round-trip tests.

It sees only the chat messages and the question text (never the generator's structured log) and
recomputes every answer from them, so a test can check that each gold answer is derivable from
what a model is shown.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_HEADER = re.compile(r"^Round (\d+): Guess (.+) \(#([^)]+)\)$")
_VALUE = re.compile(r"^(.*) \((correct|wrong|wrong, too low|wrong, too high)\)$")
NEW_GAME = "A new game with a new hidden target starts next round."


@dataclass
class TextRound:
    number: int
    guess: str
    sections: dict[str, list[tuple[str, str]]]
    correct: bool
    remaining: int
    ends_game: bool
    feedback_index: int
    call: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    tool_index: int | None = None
    game_start: int = 1

    def lists(self) -> list[list[str]]:
        """The name lists of this round's tool result, in rendered order."""
        if self.result is None:
            return []
        if "intersection" in self.result:
            return [self.result["intersection"]]
        return [entry["candidates"] for entry in self.result["per_section"]]

    def flat(self) -> list[str]:
        return [name for names in self.lists() for name in names]

    def present(self) -> set[str]:
        return set(self.flat())


def parse_history(messages: list[dict[str, Any]], offset: int = 0) -> list[TextRound]:
    """Rounds read from chat messages (``offset`` is added to message indices)."""
    rounds: list[TextRound] = []
    call = result = None
    tool_index = None
    game_start: int | None = None  # the first round's number: 1, or later in a balanced history
    for index, message in enumerate(messages):
        role = message["role"]
        if role == "assistant" and message.get("tool_calls"):
            (tool_call,) = message["tool_calls"]
            call = json.loads(tool_call["function"]["arguments"])
        elif role == "tool":
            result = json.loads(message["content"])
            tool_index = index + offset
        elif role == "user":
            lines = message["content"].split("\n")
            header = _HEADER.match(lines[0])
            assert header, lines[0]
            assert lines[1] == "Sections:"
            sections: dict[str, list[tuple[str, str]]] = {}
            position = 2
            while lines[position].startswith(" - "):
                name, _, values = lines[position][3:].partition(": ")
                sections[name] = []
                for part in values.split("; "):
                    found = _VALUE.match(part)
                    assert found, part
                    sections[name].append((found.group(1), found.group(2)))
                position += 1
            correct = lines[position] == "Result: correct"
            remaining = int(lines[position + 1].removeprefix("Remaining rounds: "))
            ends = len(lines) > position + 2 and lines[position + 2].endswith(NEW_GAME)
            number = int(header.group(1))
            game_start = number if game_start is None else game_start
            rounds.append(
                TextRound(
                    number,
                    header.group(2),
                    sections,
                    correct,
                    remaining,
                    ends,
                    index + offset,
                    call,
                    result,
                    tool_index,
                    game_start,
                )
            )
            if ends:
                game_start = number + 1
            call = result = tool_index = None
    return rounds


def weights_of(question: str) -> dict[str, int]:
    found = re.search(r"Weights: (.+?)\. What is", question)
    assert found
    out = {}
    for part in found.group(1).split(", "):
        name, weight = part.rsplit(" ", 1)
        out[name] = int(weight)
    return out


@dataclass
class Derived:
    answer: Any
    evidence: set[int] = field(default_factory=set)


def names_in(text: str) -> list[str]:
    """``"A, B and C"`` as ``["A", "B", "C"]``."""
    head, last = text.rsplit(" and ", 1)
    return [*head.split(", "), last]


def derive(question: str, rounds: list[TextRound]) -> Derived:
    """The answer to ``question`` computed from the parsed rounds, and its evidence messages."""
    by_number = {r.number: r for r in rounds}
    if m := re.fullmatch(r"How many times does (.+) appear in the tool result of round (\d+)\?", question):
        played = by_number[int(m.group(2))]
        return Derived(played.flat().count(m.group(1)), {played.tool_index})
    if m := re.fullmatch(r"How many of the names (.+) appear in the tool result of round (\d+)\?", question):
        played = by_number[int(m.group(2))]
        return Derived(sum(name in played.present() for name in names_in(m.group(1))), {played.tool_index})
    if m := re.fullmatch(
        r"How many of the names (.+) appear in the tool results of both round (\d+) and round (\d+)\? "
        r"Answer with a number\.",
        question,
    ):
        a, b = by_number[int(m.group(2))], by_number[int(m.group(3))]
        names = names_in(m.group(1))
        assert all(name in a.present() or name in b.present() for name in names)
        return Derived(sum(n in a.present() and n in b.present() for n in names), {a.tool_index, b.tool_index})
    if m := re.fullmatch(r"How many values are marked \(correct\) in the feedback of rounds (.+) together\?", question):
        chosen = [by_number[int(number)] for number in names_in(m.group(1))]
        count = sum(mark == "correct" for played in chosen for values in played.sections.values() for _, mark in values)
        return Derived(count, {played.feedback_index for played in chosen})
    if m := re.fullmatch(
        r"Across the feedback of all rounds, how many times in total are the values (.+) listed in section (.+)\?",
        question,
    ):
        values, section = names_in(m.group(1)), m.group(2)
        count = sum(v in values for r in rounds for v, _ in r.sections[section])
        holders = [r for r in rounds if any(v in values for v, _ in r.sections[section])]
        return Derived(count, {r.feedback_index for r in holders})
    if m := re.fullmatch(r"Does (.+) appear in the tool results of both round (\d+) and round (\d+)\?", question):
        a, b = by_number[int(m.group(2))], by_number[int(m.group(3))]
        return Derived(m.group(1) in a.present() and m.group(1) in b.present(), {a.tool_index, b.tool_index})
    if m := re.fullmatch(
        r"In the tool result of round (\d+), which two names come right after the first occurrence of (.+?)\?"
        r"( Read the result's lists in order as one list\.)?",
        question,
    ):
        played = by_number[int(m.group(1))]
        flat = played.flat()
        at = flat.index(m.group(2))
        return Derived(flat[at + 1 : at + 3], {played.tool_index})
    if m := re.fullmatch(r"How many values are marked \(correct\) in the feedback of round (\d+)\?", question):
        played = by_number[int(m.group(1))]
        count = sum(mark == "correct" for values in played.sections.values() for _, mark in values)
        return Derived(count, {played.feedback_index})
    if m := re.fullmatch(
        r"Across the feedback of all rounds, how many times is the value (.+) listed in section (.+)\?", question
    ):
        value, section = m.group(1), m.group(2)
        holders = [r for r in rounds if any(v == value for v, _ in r.sections[section])]
        return Derived(len(holders), {r.feedback_index for r in holders})
    if m := re.fullmatch(
        r"Which round's feedback shows the highest (.+?)(?: among rounds (\d+) to (\d+))?\? Answer with the round "
        r"number\.",
        question,
    ):
        section = m.group(1)
        low, high = (int(m.group(2)), int(m.group(3))) if m.group(2) else (rounds[0].number, rounds[-1].number)
        window = [r for r in rounds if low <= r.number <= high]
        values = [int(r.sections[section][0][0]) for r in window]
        assert values.count(max(values)) == 1, "the maximum must be unique"
        return Derived(window[values.index(max(values))].number, {r.feedback_index for r in window})
    if m := re.search(r"absolute difference between the scores of round (\d+) and round (\d+)\?$", question):
        weights = weights_of(question)
        a, b = by_number[int(m.group(1))], by_number[int(m.group(2))]

        def score(played: TextRound) -> int:
            return sum(weights[s] * sum(mark == "correct" for _, mark in v) for s, v in played.sections.items())

        return Derived(abs(score(a) - score(b)), {a.feedback_index, b.feedback_index})
    if m := re.match(
        r"The game that started in round (\d+) is not solved yet\. Which .+ is its hidden target\?", question
    ) or re.match(
        r"In the game that started in round (\d+), the hidden target was never guessed\. Which .+ was it\?", question
    ):
        start = int(m.group(1))
        game = [r for r in rounds if r.game_start == start]
        assert game and not any(r.correct for r in game)
        if question.startswith("The game"):
            assert not game[-1].ends_game and game[-1] is rounds[-1]
        listed = [r for r in game if r.result is not None]
        common = set.intersection(*(set(r.flat()) for r in listed))
        assert len(common) == 1, common
        (target,) = common
        assert target not in {r.guess for r in game}, "the target was guessed before the cut"
        return Derived(target, {r.tool_index for r in listed})
    if m := re.fullmatch(r"Which names appear in every list of the tool result of round (\d+)\?", question):
        played = by_number[int(m.group(1))]
        lists = played.lists()
        common = set.intersection(*(set(names) for names in lists))
        return Derived([name for name in lists[0] if name in common], {played.tool_index})
    raise AssertionError(f"unknown question: {question}")
