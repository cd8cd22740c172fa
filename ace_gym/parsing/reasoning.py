"""Separating ``<think>...</think>`` reasoning from the rest of a model's turn."""

from __future__ import annotations

OPEN = "<think>"
CLOSE = "</think>"
#: think blocks taken apart per turn; text after that many is left as it is (models write one)
MAX_THINK_BLOCKS = 64


def split_reasoning(text: str) -> tuple[str | None, str]:
    """Return ``(reasoning, rest)``: the text of every think block, and the text outside them.

    Handles the shapes models produce: ``<think>..</think>`` blocks anywhere (several are joined
    with a blank line), a leading ``...</think>`` whose ``<think>`` was part of the prompt
    (Qwen3 / DeepSeek-R1 templates), and an unterminated ``<think>...`` at the end (the model ran
    out of tokens while thinking: everything after it is reasoning). ``reasoning`` is None when
    the text has no think markup. Tool calls written inside reasoning are not calls. After
    :data:`MAX_THINK_BLOCKS` blocks, the rest of the text stays outside (``<think>`` tags included).
    """
    if OPEN not in text and CLOSE not in text:
        return None, text
    thoughts: list[str] = []
    outside: list[str] = []
    position = 0
    first_close = text.find(CLOSE)
    first_open = text.find(OPEN)
    if first_close != -1 and (first_open == -1 or first_close < first_open):
        thoughts.append(text[:first_close])
        position = first_close + len(CLOSE)
    while True:
        start = text.find(OPEN, position)
        if start == -1 or len(thoughts) == MAX_THINK_BLOCKS:
            outside.append(text[position:])
            break
        outside.append(text[position:start])
        end = text.find(CLOSE, start + len(OPEN))
        if end == -1:
            thoughts.append(text[start + len(OPEN) :])
            break
        thoughts.append(text[start + len(OPEN) : end])
        position = end + len(CLOSE)
    return "\n\n".join(t.strip() for t in thoughts if t.strip()), "".join(outside).replace(CLOSE, "")
