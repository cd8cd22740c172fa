"""The official AgentLongBench JSONL layout: export our samples into it, read a local copy of it.

Layout: ``<root>/{kf|ki}-{c|v}/<length>/{tool_response|env_response|final_guess}/<slug>.jsonl``,
one question type per file. A row holds ``id`` (``"<sample_id>_r<round>"``), ``sample_id``,
``question_type`` (official label), ``messages`` (OpenAI chat format, system message first),
``question``, ``answer`` and optionally ``round``, ``i_round``, ``j_round``. The setting is read
from the path segment matching ``k[if]-[cv]``, as the official runner does. The official data
itself is not shipped; point :func:`load_official` at a downloaded copy.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ace_gym.atomic import AtomicFile
from ace_gym.errors import ConfigError, DatasetError
from ace_gym.longbench.prompts import qa_prompt
from ace_gym.longbench.question_types import CATEGORIES, QUESTION_TYPES, SLUGS
from ace_gym.longbench.samples import Sample
from ace_gym.longbench.scoring import score_answer

_SETTING = re.compile(r"k([if])-([cv])")
_FORMATS = {"c": "concise", "v": "verbose"}
ROUND_FIELDS = ("round", "i_round", "j_round")


def setting_dir(knowledge: str, fmt: str) -> str:
    """The official setting directory name, e.g. ``kf-c``."""
    return f"{knowledge}-{fmt[0]}"


def sample_path(root: str | os.PathLike[str], sample: Sample) -> Path:
    """Where ``sample`` goes under ``root``."""
    question_type = sample.question.question_type
    return (
        Path(root)
        / setting_dir(sample.config.knowledge, sample.config.fmt)
        / sample.config.bucket
        / CATEGORIES[question_type]
        / f"{SLUGS[question_type]}.jsonl"
    )


def sample_row(sample: Sample, sample_id: int | str) -> dict[str, Any]:
    """``sample`` as one official row; the history keeps the game's own system prompt."""
    question = sample.question
    row: dict[str, Any] = {
        "id": f"{sample_id}_r{question.rounds.get('round', len(sample.trajectory.rounds))}",
        "sample_id": sample_id,
        "question_type": question.question_type,
        "messages": [{"role": "system", "content": sample.game_prompt}, *sample.trajectory.messages],
        "question": question.text,
        "answer": question.answer,
    }
    row.update(question.rounds)
    return row


class OfficialExporter:
    """Writes samples into the official layout under ``root``, streaming.

    Rows go to temporary files next to their targets as they are added; :meth:`close` (or leaving
    the ``with`` block without an error) moves every file into place at once, replacing files of
    the same name. Returns nothing half-written: on an error the temporary files are removed.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._open: dict[Path, AtomicFile] = {}
        self.paths: list[Path] = []

    def add(self, sample: Sample, sample_id: int | str | None = None) -> Path:
        """Append ``sample`` (id: ``sample_id``, default its seed) and return its file.
        ConfigError for a question the official scoring would misread (a balanced Find
        Duplicates counts names where the official layout answers yes or no)."""
        question = sample.question
        if question.scored_as != question.question_type:
            raise ConfigError(
                "answers",
                sample.config.answers,
                f"a {question.question_type!r} question of this form has no official answer; build it with answers='paper'",
            )
        path = sample_path(self.root, sample)
        if path not in self._open:
            self._open[path] = AtomicFile(path, text=True)
        row = sample_row(sample, sample.seed if sample_id is None else sample_id)
        self._open[path].handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        return path

    def close(self) -> list[Path]:
        """Move every written file into place; returns their paths."""
        try:
            for path, target in self._open.items():
                target.commit()
                self.paths.append(path)
        except BaseException:
            self.discard()
            raise
        self._open.clear()
        return self.paths

    def discard(self) -> None:
        for target in self._open.values():
            target.discard()
        self._open.clear()

    def __enter__(self) -> OfficialExporter:
        return self

    def __exit__(self, error_type: object, *rest: object) -> None:
        if error_type is None:
            self.close()
        else:
            self.discard()


# ------------------------------------------------------------------------------------------
# reading


@dataclass(frozen=True)
class OfficialRow:
    """One row of an official file, with its setting read from the path."""

    source: str
    line: int
    knowledge: str
    fmt: str
    length: str
    id: str
    sample_id: Any
    question_type: str
    messages: list[dict[str, Any]]
    question: str
    answer: Any
    rounds: dict[str, int] = field(default_factory=dict)

    def prompt(self) -> list[dict[str, Any]]:
        """The messages to send a model, as the official runner builds them: our question-answering
        system prompt replaces the row's system messages, the question is the last user turn."""
        history = [m for m in self.messages if m.get("role") != "system"]
        return [
            {"role": "system", "content": qa_prompt(None, self.fmt, self.question_type)},
            *history,
            {"role": "user", "content": self.question},
        ]

    def score(self, text: str) -> float | None:
        """The official score of a model's raw answer ``text`` (None: the gold does not parse)."""
        return score_answer(self.question_type, self.fmt, self.knowledge, self.answer, text)


def setting_of(path: str | os.PathLike[str]) -> tuple[str, str]:
    """``(knowledge, fmt)`` from the first path segment matching ``k[if]-[cv]``; DatasetError if none."""
    for part in Path(path).parts:
        match = _SETTING.fullmatch(part.lower())
        if match:
            return f"k{match.group(1)}", _FORMATS[match.group(2)]
    raise DatasetError(os.fspath(path), "$", "no path segment names the setting (ki-c, ki-v, kf-c or kf-v)")


def read_official_file(path: str | os.PathLike[str]) -> list[OfficialRow]:
    """Every row of one official JSONL file, validated before any is returned (DatasetError names
    the file, the line and the problem; a file must hold exactly one question type)."""
    source = os.fspath(path)
    knowledge, fmt = setting_of(path)
    length = Path(path).parent.parent.name
    rows: list[OfficialRow] = []
    with open(source, encoding="utf-8") as handle:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                raw = json.loads(text)
            except ValueError as error:
                raise DatasetError(source, f"line {number}", f"not JSON ({error})") from None
            rows.append(_row(source, number, raw, knowledge, fmt, length))
    types = {row.question_type for row in rows}
    if len(types) > 1:
        raise DatasetError(source, "$", f"holds several question types: {sorted(types)}")
    return rows


def _row(source: str, number: int, raw: Any, knowledge: str, fmt: str, length: str) -> OfficialRow:
    where = f"line {number}"
    if not isinstance(raw, Mapping):
        raise DatasetError(source, where, "a row must be a JSON object")
    for key in ("id", "question_type", "messages", "question", "answer"):
        if key not in raw:
            raise DatasetError(source, f"{where}.{key}", "missing")
    if raw["question_type"] not in QUESTION_TYPES:
        raise DatasetError(source, f"{where}.question_type", f"unknown label {raw['question_type']!r}")
    messages = raw["messages"]
    if not isinstance(messages, list) or not all(isinstance(m, Mapping) and "role" in m for m in messages):
        raise DatasetError(source, f"{where}.messages", "must be a list of chat messages")
    if not isinstance(raw["question"], str):
        raise DatasetError(source, f"{where}.question", "must be a string")
    rounds = {key: raw[key] for key in ROUND_FIELDS if key in raw}
    return OfficialRow(
        source,
        number,
        knowledge,
        fmt,
        length,
        str(raw["id"]),
        raw.get("sample_id"),
        raw["question_type"],
        [dict(m) for m in messages],
        raw["question"],
        raw["answer"],
        rounds,
    )


def load_official(root: str | os.PathLike[str], *, settings: Sequence[str] | None = None) -> Iterator[OfficialRow]:
    """Every row of every ``*.jsonl`` under ``root`` whose path names a setting (files in sorted
    path order), optionally only the ``settings`` given (e.g. ``["kf-c"]``)."""
    for path in sorted(Path(root).rglob("*.jsonl")):
        setting = _setting_name(path.relative_to(root))
        if setting is not None and (settings is None or setting in settings):
            yield from read_official_file(path)


def _setting_name(path: Path) -> str | None:
    for part in path.parts:
        if _SETTING.fullmatch(part.lower()):
            return part.lower()
    return None
