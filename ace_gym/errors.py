"""Typed errors: bad configuration and bad data raise these; bad agent actions never do."""

from __future__ import annotations

import difflib
import math
import numbers
from collections.abc import Iterable, Sequence

import numpy as np


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


class InUseError(AceGymError):
    """Another process holds what a command needs (an output directory, a port): exit code 3."""


class ServerStartError(AceGymError):
    """The env server, or one of its worker processes, failed while starting (``ace-gym serve``:
    exit code 1); the message is one line naming the cause."""


class DatasetError(AceGymError, ValueError):
    """A dataset file is malformed; names the file, the JSON path inside it and the problem."""

    def __init__(self, source: str, json_path: str, problem: str) -> None:
        self.source, self.json_path, self.problem = source, json_path, problem
        super().__init__(f"{source}: at {json_path}: {problem}")

    def __reduce__(self) -> tuple[type, tuple[str, str, str]]:
        return (type(self), (self.source, self.json_path, self.problem))


class EngineUnavailableError(AceGymError, RuntimeError):
    """An LLM engine cannot reach or load its model: an endpoint that refuses the connection, does
    not resolve, times out, rejects the key (401/403), does not serve the model (404) or stays
    unavailable after the client's retries, or a local model that does not load.

    An infrastructure failure, never an episode outcome: the rollouts let it propagate and store
    nothing for the episodes in flight, so a resumed run plays them again. ``target`` is what was
    tried (an endpoint's base URL and model, a model path), ``problem`` why it failed; the message
    is one line."""

    def __init__(self, target: str, problem: str) -> None:
        self.target = target
        self.problem = one_line(problem)
        super().__init__(f"{target}: {self.problem}")

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        # Ray workers and vector envs pickle errors: keep the arguments
        return (type(self), (self.target, self.problem))


def one_line(text: object, limit: int = 300) -> str:
    """``text`` as one line: whitespace runs collapsed, cut to ``limit`` characters (``...`` marks a cut)."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """Return ' (did you mean X?)' for the closest choice, or '' when nothing is close."""
    close = difflib.get_close_matches(str(name), list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


# --------------------------------------------------------------------------------------------
# argument validators: the one rule for every configuration value ace-gym accepts
#
# An integer is a Python or numpy integer, never a bool (``True`` is an int to Python, but a flag
# passed where a count belongs is a mistake). A number is an integer or a Python/numpy real, never
# a bool and never NaN. Each validator returns a plain Python value (numpy scalars from a sweep
# come back as int/float) or raises ConfigError naming the field, the value and what it must be.


def integer(
    field: str, value: object, *, minimum: int | None = None, maximum: int | None = None, note: str = ""
) -> int:
    """``value`` as an int if it is a Python or numpy integer (not a bool) in ``[minimum, maximum]``
    (either end may be left open); ConfigError naming ``field`` otherwise. ``note`` ends the message."""
    if type(value) is int:  # the common case, without the abstract-base-class checks (~1 us per reset)
        if _within(value, minimum, maximum):
            return value
    elif _is_integer(value) and _within(int(value), minimum, maximum):  # type: ignore[call-overload]
        return int(value)  # type: ignore[call-overload]
    raise ConfigError(field, value, _expected("an integer", minimum, maximum, None, note))


def optional_integer(
    field: str, value: object, *, minimum: int | None = None, maximum: int | None = None
) -> int | None:
    """None, or ``value`` checked by :func:`integer`."""
    if value is None:
        return None
    return integer(field, value, minimum=minimum, maximum=maximum, note="or None")


def integers(field: str, value: object, *, minimum: int | None = None, maximum: int | None = None) -> tuple[int, ...]:
    """An integer or a non-empty sequence of integers, each checked as by :func:`integer`, as a tuple."""
    listed = [value] if _is_integer(value) else value
    if isinstance(listed, (Sequence, np.ndarray)) and not isinstance(listed, (str, bytes)) and len(listed) > 0:
        if all(_is_integer(item) and _within(int(item), minimum, maximum) for item in listed):
            return tuple(int(item) for item in listed)
    raise ConfigError(field, value, _expected("an integer or a non-empty list of integers", minimum, maximum, None, ""))


def number(
    field: str,
    value: object,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    above: float | None = None,
    finite: bool = False,
    note: str = "",
) -> int | float:
    """``value`` as a plain int (for an integer) or float if it is a real number, not a bool nor
    NaN, with ``minimum <= value <= maximum`` and ``value > above`` (each optional; ``finite``
    also refuses infinities); ConfigError naming ``field`` otherwise."""
    kind = "a finite number" if finite else "a number"
    if not isinstance(value, (bool, np.bool_)) and isinstance(value, numbers.Real):
        plain = int(value) if isinstance(value, numbers.Integral) else float(value)
        if (
            not math.isnan(plain)
            and not (finite and math.isinf(plain))
            and _within(plain, minimum, maximum)
            and (above is None or plain > above)
        ):
            return plain
    raise ConfigError(field, value, _expected(kind, minimum, maximum, above, note))


def probability(field: str, value: object) -> float:
    """``value`` as a float if it is a number in ``[0, 1]`` (as :func:`number`); ConfigError otherwise."""
    return float(number(field, value, minimum=0, maximum=1, note="(a probability)"))


def flag(field: str, value: object) -> bool:
    """``value`` as a bool if it is a Python or numpy bool (not 0/1, not a string); ConfigError otherwise."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ConfigError(field, value, "must be true or false")


def choice(field: str, value: object, choices: Iterable[str]) -> str:
    """``value`` if it is one of the strings ``choices``; ConfigError listing them, with a
    "did you mean" for a near miss, otherwise."""
    options = list(choices)
    if isinstance(value, str) and value in options:
        return value
    hint = did_you_mean(value, options) if isinstance(value, str) else ""
    raise ConfigError(field, value, f"must be one of {options}{hint}")


def _is_integer(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _within(value: float, minimum: float | None, maximum: float | None) -> bool:
    return (minimum is None or value >= minimum) and (maximum is None or value <= maximum)


def _expected(kind: str, minimum: float | None, maximum: float | None, above: float | None, note: str) -> str:
    """``must be <kind> <range>[ <note>]``, e.g. ``must be an integer in [0, 9]``."""
    conditions = []
    if minimum is not None and maximum is not None:
        conditions.append(f"in [{_shown(minimum)}, {_shown(maximum)}]")
    elif minimum is not None:
        conditions.append(f">= {_shown(minimum)}")
    elif maximum is not None:
        conditions.append(f"<= {_shown(maximum)}")
    if above is not None:
        conditions.append(f"> {_shown(above)}")
    text = " ".join([f"must be {kind}", " and ".join(conditions)]).rstrip()
    return f"{text} {note}" if note else text


def _shown(bound: float) -> str:
    return str(bound) if isinstance(bound, int) else f"{bound:g}"
