"""How the game looks as chat messages: guesses, feedback, tool calls and tool results.

The layout follows the paper's trajectory examples; the exact wording is ours. A feedback reads::

    Round 11: Guess Kirlia (#0281)
    Sections:
     - Type: Psychic (wrong); Fairy (wrong)
     - Base Stats: 278 (wrong, too low)
    Result: wrong
    Remaining rounds: 1999

followed, when the game just ended, by one line saying a new game starts. Tool results are JSON:
``{"intersection": [...]}`` (concise) or ``{"per_section": [{"section", "conditions",
"candidates"}, ...]}`` (verbose), byte-identical to ``json.dumps(..., ensure_ascii=False)``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ace_gym.longbench.engine import Condition, Feedback, Query
from ace_gym.longbench.tables import ItemTable

FORMATS: tuple[str, ...] = ("concise", "verbose")
GAME_SOLVED = "The target was found. A new game with a new hidden target starts next round."
GAME_EXHAUSTED = "No rounds left. A new game with a new hidden target starts next round."


def guess_message(table: ItemTable, item: int) -> dict[str, Any]:
    """The assistant message guessing ``item``."""
    return {"role": "assistant", "content": f"<answer>{table.names[item]}</answer>"}


def feedback_text(
    table: ItemTable, feedback: Feedback, round_number: int, remaining: int, *, chained: bool = True
) -> str:
    """The environment's feedback message (layout in the module docstring). With ``chained`` (a
    rollout of chained games) a solved game, or one with no rounds left, gets the new-game line."""
    lines = [f"Round {round_number}: Guess {table.names[feedback.guess]} (#{table.codes[feedback.guess]})", "Sections:"]
    for section in feedback.sections:
        marked = "; ".join(f"{value} ({mark})" for value, mark in zip(section.values, section.marks, strict=True))
        lines.append(f" - {section.section}: {marked}")
    lines.append(f"Result: {'correct' if feedback.correct else 'wrong'}")
    lines.append(f"Remaining rounds: {remaining}")
    if chained and feedback.correct:
        lines.append(GAME_SOLVED)
    elif chained and remaining == 0:
        lines.append(GAME_EXHAUSTED)
    return "\n".join(lines)


def tool_arguments(conditions: Sequence[Condition]) -> str:
    """The JSON arguments of a query call."""
    return json.dumps({"conditions": [c.to_json() for c in conditions]}, ensure_ascii=False)


def tool_call_message(table: ItemTable, conditions: Sequence[Condition], call_id: str) -> dict[str, Any]:
    """The assistant message calling the query tool with ``conditions``."""
    function = {"name": table.tool_name, "arguments": tool_arguments(conditions)}
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


def tool_result_text(table: ItemTable, query: Query, fmt: str) -> str:
    """The query tool's result in ``fmt`` ("concise" or "verbose")."""
    names = table.name_array
    if fmt == "concise":
        return json.dumps({"intersection": names[query.intersection].tolist()}, ensure_ascii=False)
    sections = [
        {
            "section": section,
            "conditions": [{k: v for k, v in c.to_json().items() if k != "section"} for c in conditions],
            "candidates": names[mask].tolist(),
        }
        for section, conditions, mask in query.per_section
    ]
    return json.dumps({"per_section": sections}, ensure_ascii=False)


def tool_result_message(table: ItemTable, query: Query, fmt: str, call_id: str) -> dict[str, Any]:
    """The tool message answering call ``call_id``."""
    return {
        "role": "tool",
        "tool_call_id": call_id,
        "name": table.tool_name,
        "content": tool_result_text(table, query, fmt),
    }


def transcript(messages: Sequence[Mapping[str, Any]]) -> str:
    """A flat text rendering of chat messages: one block per message, headed by its role (and for
    tool calls the tool name and JSON arguments)."""
    blocks = []
    for message in messages:
        role = message["role"]
        if role == "tool":
            blocks.append(f"[tool {message.get('name', '')}]\n{message['content']}")
            continue
        text = f"[{role}]\n{message.get('content') or ''}"
        for call in message.get("tool_calls") or ():
            text += f"\n[call {call['function']['name']}] {call['function']['arguments']}"
        blocks.append(text)
    return "\n\n".join(blocks)
