"""Typed errors: bad configuration and bad data raise these; bad agent actions never do."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class AceGymError(Exception):
    """Base class of every error ace-gym raises on purpose."""


class ConfigError(AceGymError, ValueError):
    """An env, wrapper or generator was configured with an invalid value."""

    def __init__(self, field: str, value: object, problem: str) -> None:
        self.field, self.value, self.problem = field, value, problem
        super().__init__(f"{field}={value!r}: {problem}")

    def __reduce__(self) -> tuple[type, tuple[str, object, str]]:
        # keyword-style constructor: pickle (worker processes, vector envs) needs the arguments
        return (type(self), (self.field, self.value, self.problem))


class DatasetError(AceGymError, ValueError):
    """A dataset file is malformed; names the file, the JSON path inside it and the problem."""

    def __init__(self, source: str, json_path: str, problem: str) -> None:
        self.source, self.json_path, self.problem = source, json_path, problem
        super().__init__(f"{source}: at {json_path}: {problem}")

    def __reduce__(self) -> tuple[type, tuple[str, str, str]]:
        return (type(self), (self.source, self.json_path, self.problem))


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """Return ' (did you mean X?)' for the closest choice, or '' when nothing is close."""
    close = difflib.get_close_matches(str(name), list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
