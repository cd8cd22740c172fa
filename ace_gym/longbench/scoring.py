"""The official AgentLongBench answer parsing and scoring, reimplemented from its documented rules.

A model's answer is read from the **last** ``<answer>...</answer>`` (tag matched case-insensitively,
content stripped); without one it cannot be parsed and scores 0 (verbose Intersection: an empty
list). Then, by question type:

* numbers: the last number inside the tag (thousands commas dropped), truncated to an integer;
* yes/no: a negation word (no, false, not, doesn't, does not, none, neither) anywhere means no;
  else a positive word (yes, true, contain(s), appear(s), does, both) means yes; else the first
  number, yes when > 0. So "not only in both" is no;
* Find Target Offsets: a JSON/Python list of at least two names, or the text split on commas,
  "and", newlines, ``;`` and ``|`` with leading "1."-style numbering removed. Names compare after
  lower-casing and removing spaces, hyphens, apostrophes, double quotes and dots (and underscores
  in the knowledge-free setting). Exactly the gold pair in order scores 1; a single name equal to
  the gold's first scores 0.5; anything else (three names included) 0;
* concise Intersection: the normalised name must equal the gold's;
* verbose Intersection: set F1 between the raw (stripped, unnormalised) names; both empty scores 1,
  one empty 0.

Gold answers are read the official way too (numbers: the first number of a string; yes/no: bools,
or strings containing yes/true/1, else no/false/0; pairs: a list, or a string with at least two
parts). A sample whose gold does not parse is not scored (:func:`score_answer` returns None) and
does not count towards accuracy.

For training, :func:`strict_score` scores only an answer of the form its question type asks
for (:func:`is_well_formed`): a yes/no answer must begin with yes, no, true or false (the official
reading must agree), a number answer must hold a number, a name answer a name. Anything else
scores 0, where the official rules read any text with a negation word (``"definitely not the
answer"``) as "no" and so pay garbage on every question whose truth is no. An answer that is well
formed scores exactly its official score, so the strict score never exceeds the official one.

Departures (only reachable by hostile text): a number too large for a float is skipped like an
unreadable one instead of raising, and the tag search is linear in the text length.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from typing import Any

from ace_gym.longbench.question_types import FIND_DUPLICATES, FIND_TARGET_OFFSETS, INTERSECTION, NUMBER_TYPES

_TAG = re.compile(r"<answer>|</answer>", re.IGNORECASE)
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
_GOLD_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_INTEGER = re.compile(r"-?\d[\d,]*")
_NEGATIVE = re.compile(r"\b(no|false|not|doesn't|does not|none|neither)\b")
_POSITIVE = re.compile(r"\b(yes|true|contain|contains|appear|appears|does|both)\b")
_AND = re.compile(r"\band\b", re.IGNORECASE)
_SEPARATORS = re.compile(r"[\n;|]")
_NUMBERING = re.compile(r"^\d+\.?\s*")
_GOLD_PAIR_SPLIT = re.compile(r"[,;]|\s+and\s+", re.IGNORECASE)
_FIRST_WORD = re.compile(r"[a-z]+")
YES_NO_WORDS: dict[str, bool] = {"yes": True, "true": True, "no": False, "false": False}
"""The words a well-formed yes/no answer begins with, and what each means."""


def answer_text(answer: Any) -> str:
    """An answer written the way the question-answering prompt asks for it, tags included (a
    grader's or a scripted policy's reply)."""
    if isinstance(answer, bool):
        return "<answer>yes</answer>" if answer else "<answer>no</answer>"
    if isinstance(answer, list):
        return f"<answer>{' and '.join(answer) if len(answer) == 2 else ', '.join(answer)}</answer>"
    return f"<answer>{answer}</answer>"


def extract_answer(text: str) -> str | None:
    """The stripped content of the last complete ``<answer>...</answer>`` in ``text`` (the first
    closing tag after each opening one), or None."""
    if not isinstance(text, str):
        return None
    found = None
    opening: int | None = None
    for match in _TAG.finditer(text):
        closing = match.group(0)[1] == "/"
        if opening is None and not closing:
            opening = match.end()
        elif opening is not None and closing:
            found = text[opening : match.start()]
            opening = None
    return None if found is None else found.strip()


def _integer(text: str) -> int | None:
    try:
        return int(float(text.replace(",", "")))
    except (ValueError, OverflowError):
        return None


def parse_number(text: str) -> int | None:
    """The answer's last number, truncated (None if there is no tag or no number)."""
    inner = extract_answer(text)
    if inner is None:
        return None
    for candidate in reversed(_NUMBER.findall(inner)):
        number = _integer(candidate)
        if number is not None:
            return number
    return None


def parse_boolean(text: str) -> bool | None:
    """The answer's yes/no (negation first, see the module docstring)."""
    inner = extract_answer(text)
    if inner is None:
        return None
    lowered = inner.lower()
    if _NEGATIVE.search(lowered):
        return False
    if _POSITIVE.search(lowered):
        return True
    match = _INTEGER.search(inner)
    if match:
        number = _integer(match.group(0))
        return None if number is None else number > 0
    return None


def _literal_list(text: str) -> list[str] | None:
    if not (text.startswith("[") and text.endswith("]")):
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if not isinstance(value, list):
        return None
    return [str(x).strip() for x in value if str(x).strip()]


def parse_pair(text: str) -> list[str] | None:
    """The answer's names for Find Target Offsets (any count; scoring wants exactly two)."""
    inner = extract_answer(text)
    if inner is None:
        return None
    inner = inner.strip()
    names = _literal_list(inner)
    if names is not None and len(names) >= 2:
        return names
    normalised = _SEPARATORS.sub(",", _AND.sub(",", inner))
    tokens = [_NUMBERING.sub("", chunk).strip() for chunk in normalised.split(",")]
    tokens = [t for t in tokens if t]
    return tokens or None


def parse_name_list(text: str) -> list[str]:
    """The answer's names for verbose Intersection ([] without a tag)."""
    inner = extract_answer(text)
    if not inner:
        return []
    names = _literal_list(inner)
    if names is not None:
        return names
    normalised = _SEPARATORS.sub(",", _AND.sub(",", inner))
    return [chunk.strip() for chunk in normalised.split(",") if chunk.strip()]


def parse_name(text: str) -> str | None:
    """The answer's name for concise Intersection."""
    inner = extract_answer(text)
    return inner or None


def parse_prediction(question_type: str, fmt: str, text: str) -> Any:
    """The parsed value the official runner would store for ``text`` (None when unreadable)."""
    if question_type in NUMBER_TYPES:
        return parse_number(text)
    if question_type == FIND_DUPLICATES:
        return parse_boolean(text)
    if question_type == FIND_TARGET_OFFSETS:
        return parse_pair(text)
    if question_type == INTERSECTION and fmt == "verbose":
        return parse_name_list(text)
    return parse_name(text)


def normalize_name(name: str, knowledge: str) -> str:
    """A name as official comparisons see it (underscores removed only for "kf")."""
    text = str(name).strip().lower()
    for mark in (" ", "-", "'", '"', ".", *(("_",) if knowledge == "kf" else ())):
        text = text.replace(mark, "")
    return text


def _gold_number(gold: Any) -> int | None:
    if gold is None or isinstance(gold, bool):
        return None if gold is None else int(gold)
    if isinstance(gold, int):
        return gold
    if isinstance(gold, float):
        return int(gold)
    match = _GOLD_NUMBER.search(str(gold))
    return _integer(match.group(0)) if match else None


def _gold_boolean(gold: Any) -> bool | None:
    if gold is None:
        return None
    if isinstance(gold, bool):
        return gold
    if isinstance(gold, int):
        return gold > 0
    text = str(gold).lower().strip()
    if any(word in text for word in ("yes", "true", "1")):
        return True
    if any(word in text for word in ("no", "false", "0")):
        return False
    return None


def _names(value: Any, knowledge: str) -> list[str] | None:
    if isinstance(value, list):
        return [normalize_name(v, knowledge) for v in value if isinstance(v, str)]
    if isinstance(value, str):
        parts = _GOLD_PAIR_SPLIT.split(value.strip("[](){}"))
        if len(parts) >= 2:
            return [normalize_name(p.strip(), knowledge) for p in parts]
    return None


def _raw_set(value: Any) -> set[str]:
    if isinstance(value, list):
        return {str(v).strip() for v in value if str(v).strip()}
    if isinstance(value, str):
        return {part for chunk in value.replace("\n", ",").split(",") for part in chunk.split() if part}
    return set()


def set_f1(predicted: Any, gold: Any) -> float:
    """Official verbose-Intersection F1 between two name lists (both empty: 1, one empty: 0)."""
    pred, true = _raw_set(predicted), _raw_set(gold)
    if not pred and not true:
        return 1.0
    if not pred or not true:
        return 0.0
    hits = len(pred & true)
    if hits == 0:
        return 0.0
    precision, recall = hits / len(pred), hits / len(true)
    return 2 * precision * recall / (precision + recall)


def pair_score(predicted: Sequence[str], gold: Sequence[str]) -> float:
    """Official Find Target Offsets credit between normalised name lists."""
    if not predicted or not gold:
        return 0.0
    if len(predicted) == 2 and len(gold) == 2 and list(predicted) == list(gold):
        return 1.0
    if len(predicted) == 1 and len(gold) == 2 and predicted[0] == gold[0]:
        return 0.5
    return 0.0


def score_prediction(question_type: str, fmt: str, knowledge: str, gold: Any, prediction: Any) -> float | None:
    """The official score of a parsed ``prediction`` against ``gold``; None when the gold does not
    parse (the sample is then left out of accuracy)."""
    if question_type == INTERSECTION and fmt == "verbose":
        return set_f1(prediction, gold)
    if question_type in NUMBER_TYPES:
        expected = _gold_number(gold)
        if expected is None:
            return None
        return float(_gold_number(prediction) == expected) if prediction is not None else 0.0
    if question_type == FIND_DUPLICATES:
        expected_bool = _gold_boolean(gold)
        if expected_bool is None:
            return None
        return float(_gold_boolean(prediction) == expected_bool) if prediction is not None else 0.0
    if question_type == FIND_TARGET_OFFSETS:
        expected_names = _names(gold, knowledge)
        if expected_names is None:
            return None
        predicted = _names(prediction, knowledge)
        return pair_score(predicted, expected_names) if predicted is not None else 0.0
    expected_name = normalize_name(str(gold or ""), knowledge)
    if not expected_name:
        return None
    return float(normalize_name(str(prediction or ""), knowledge) == expected_name)


def score_answer(question_type: str, fmt: str, knowledge: str, gold: Any, text: str) -> float | None:
    """Parse a model's raw ``text`` and score it officially (None: the gold does not parse)."""
    return score_prediction(question_type, fmt, knowledge, gold, parse_prediction(question_type, fmt, text))


def is_well_formed(question_type: str, fmt: str, text: str) -> bool:
    """Whether ``text`` holds an answer of the form the question type asks for (module
    docstring): a tag whose content is, for yes/no, led by a word of :data:`YES_NO_WORDS` that
    the official reading agrees with; for numbers, a number; for names, at least one name."""
    prediction = parse_prediction(question_type, fmt, text)
    if question_type == FIND_DUPLICATES:
        inner = extract_answer(text) or ""
        first = _FIRST_WORD.match(inner.lower().lstrip(" \t\n\"'*([{"))
        return (
            first is not None
            and YES_NO_WORDS.get(first.group(0)) is not None
            and (YES_NO_WORDS[first.group(0)] == prediction)
        )
    if question_type in NUMBER_TYPES:
        return prediction is not None
    return bool(prediction)  # a name, or a non-empty list of names


def strict_score(question_type: str, fmt: str, knowledge: str, gold: Any, text: str) -> float | None:
    """The training score of a model's raw ``text``: its official score when the answer is well
    formed (:func:`is_well_formed`), else 0; None when the gold does not parse (as the official
    score)."""
    official = score_answer(question_type, fmt, knowledge, gold, text)
    if official is None:
        return None
    return official if is_well_formed(question_type, fmt, text) else 0.0
