"""System prompts: the game's own (what the investigator was told; exported with the history and
used by the interactive puzzle) and the question-answering ones that replace it when a model is
asked about a history, as the official runner does. All wording is ours."""

from __future__ import annotations

from ace_gym.longbench.question_types import (
    FIND_DUPLICATES,
    FIND_TARGET_OFFSETS,
    INTERSECTION,
    NUMBER_TYPES,
)
from ace_gym.longbench.tables import ItemTable

GUESS_TOOL = "guess"


def _sections(table: ItemTable) -> str:
    return ", ".join(f"{s.name} ({'list of values' if s.kind == 'categorical' else 'number'})" for s in table.sections)


def _rules(table: ItemTable, fmt: str) -> str:
    noun = table.noun
    result = (
        'The tool returns {"intersection": [...]}: the names that meet every condition.'
        if fmt == "concise"
        else 'The tool returns {"per_section": [...]}: one entry per section that has conditions, in the order '
        'the sections first appear in the call, with "candidates" listing the names that meet that '
        "section's conditions only."
    )
    return (
        f"A hidden target {noun} is chosen from a fixed list of {table.size} names. Every {noun} has these sections: "
        f"{_sections(table)}.\n"
        f"A guess is written <answer>NAME</answer>. The feedback lists every section of the guessed {noun}: each "
        "value of a list section is marked (correct) if the target has it too, else (wrong); a number is marked "
        "(correct), (wrong, too low) or (wrong, too high) compared with the target's number.\n"
        f"Before a guess the tool {table.tool_name} may be called with a list of conditions. "
        '{"type": "value", "section": S, "values": [...], "exclude": false} keeps the names holding all the values '
        '(with "exclude": true, the names holding none of them); {"type": "numeric", "section": S, "comparator": '
        '">" | "<" | "==", "threshold": N} compares the number. ' + result + "\n"
        "A game ends when the target is guessed or its rounds run out; then a new game with a new hidden target "
        "begins. Rounds are numbered across games."
    )


def game_prompt(table: ItemTable, fmt: str, rounds_per_game: int) -> str:
    """The system message of a game of ``table`` in format ``fmt``."""
    return (
        f"You are playing a guessing game with {rounds_per_game} rounds per game.\n{_rules(table, fmt)}\n"
        f"Find the target in as few rounds as possible: call {table.tool_name} to narrow the candidates, then "
        f"guess with <answer>NAME</answer> (or the {GUESS_TOOL} tool)."
    )


def answer_form(fmt: str, question_type: str) -> str:
    """How an answer of ``question_type`` must be written."""
    if question_type in NUMBER_TYPES:
        return "Answer with one number written in digits, e.g. <answer>3</answer>."
    if question_type == FIND_DUPLICATES:
        return "Answer yes or no, e.g. <answer>yes</answer>."
    if question_type == FIND_TARGET_OFFSETS:
        return "Answer with the two names in order, as <answer>NAME1 and NAME2</answer>."
    if question_type == INTERSECTION and fmt == "concise":
        return "Answer with the name only, e.g. <answer>NAME</answer>. Do not call any tool."
    return "Answer with the names as a comma-separated list, e.g. <answer>NAME1, NAME2</answer>. Do not call any tool."


ROUND_DEFINITION = (
    "Round r consists of the agent's tool call and the tool's result (absent in the first round of each game), "
    'then the agent\'s guess and the feedback that starts with "Round r:".'
)


def qa_prompt(table: ItemTable | None, fmt: str, question_type: str) -> str:
    """The system message of a question of ``question_type`` about a history of ``table`` (None:
    a history from elsewhere, e.g. the official dataset, described without table details)."""
    rules = (
        _rules(table, fmt)
        if table is not None
        else "Each guess gets feedback on every section of the guessed entity, and the agent's tool calls "
        "return candidate names."
    )
    return (
        "You are given the log of a guessing game played by an agent.\n"
        f"{rules}\n{ROUND_DEFINITION}\n"
        f"Answer the question at the end from the log alone. {answer_form(fmt, question_type)} "
        "Put the final answer inside <answer></answer>."
    )
