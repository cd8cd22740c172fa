"""Gymnasium spaces for text observations and tool-call actions."""

from __future__ import annotations

import copy
import json
import os
import pickle
import shutil
import tempfile
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from types import ModuleType
from typing import Any, overload

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import (
    batch_space,
    create_shared_memory,
    iterate,
    read_from_shared_memory,
    write_to_shared_memory,
)

from ace_gym.atomic import write_atomic
from ace_gym.text import valid_text

_PRINTABLE = tuple(chr(c) for c in range(32, 127))
#: what a vector env hands an env in place of an action no env process could receive
UNSENDABLE_ACTION = "<an action that cannot be sent to an env process ({problem})>"


@dataclass(frozen=True)
class ToolCall:
    """A typed tool call; ``arguments`` is a mapping or a JSON object string."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)


# what json.dumps(..., ensure_ascii=False, default=repr) builds on every call (an encoder holds no state)
_ARGUMENTS = json.JSONEncoder(ensure_ascii=False, default=repr)
_SORTED_ARGUMENTS = json.JSONEncoder(ensure_ascii=False, default=repr, sort_keys=True)


def arguments_json(arguments: Any, *, sort_keys: bool = False) -> str:
    """JSON text of tool-call arguments as a model sent them; never raises, and valid UTF-8
    (lone surrogates become U+FFFD).

    Values JSON has no type for (numpy scalars, sets...) are written as their ``repr``. When the
    value cannot be written at all (nesting past the recursion limit, an integer past Python's
    digit limit, a failing ``repr``), the result is a JSON string naming its type, e.g.
    ``"<unserialisable list>"``.
    """
    try:
        return valid_text((_SORTED_ARGUMENTS if sort_keys else _ARGUMENTS).encode(arguments))
    except Exception:  # any model-sent value: what failed does not matter, only that we answer
        return json.dumps(f"<unserialisable {type(arguments).__name__}>")


class ObjectSpace(spaces.Space[Any]):
    """A space of Python objects of unbounded size (text, chat messages, tool calls).

    Not flattenable to numpy. In a Gymnasium ``AsyncVectorEnv`` with ``shared_memory=True`` (the
    default) observations travel through :class:`ObservationFiles` instead of a fixed-size buffer;
    in any vector env its batch is an :class:`ObjectBatch`.
    """

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def unsendable(self, problem: str) -> Any:
        """What a vector env passes on instead of an action it cannot send to an env process."""
        return UNSENDABLE_ACTION.format(problem=problem)


class UnicodeText(ObjectSpace):
    """Any Python ``str`` of at most ``max_length`` characters (samples printable ASCII)."""

    def __init__(self, max_length: int = 1 << 31, seed: int | np.random.Generator | None = None) -> None:
        self.max_length = max_length
        super().__init__(dtype=str, seed=seed)

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        length = int(self.np_random.integers(0, min(self.max_length, 64) + 1))
        return "".join(self.np_random.choice(_PRINTABLE, size=length))

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"UnicodeText(max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnicodeText) and other.max_length == self.max_length


class ToolCallSpace(ObjectSpace):
    """Tool calls ``{"name": str, "arguments": dict | JSON string}`` (or :class:`ToolCall`).

    ``contains`` accepts any well-formed call, whatever the tool name or argument values: the env
    answers bad names and values with error observations. ``sample`` draws a call to one of
    ``tool_names`` with small random row/col/id/field arguments.
    """

    def __init__(self, tool_names: Sequence[str], seed: int | np.random.Generator | None = None) -> None:
        self.tool_names = tuple(tool_names)
        super().__init__(dtype=object, seed=seed)

    def sample(self, mask: Any = None, probability: Any = None) -> dict[str, Any]:
        rng = self.np_random
        name = self.tool_names[int(rng.integers(len(self.tool_names)))]
        arguments: dict[str, Any] = {"row": int(rng.integers(-1, 8)), "col": int(rng.integers(-1, 8))}
        if rng.random() < 0.5:
            arguments["id"] = f"X{int(rng.integers(1000))}"
        if rng.random() < 0.5:
            arguments.update(field="name", operator="not_in", value=[])
        return {"name": name, "arguments": arguments}

    def unsendable(self, problem: str) -> dict[str, Any]:
        """A call the env answers ``Unknown tool, '<...(problem)>'``: the explanation reaches the agent."""
        return {"name": super().unsendable(problem), "arguments": {}}

    def contains(self, x: Any) -> bool:
        if isinstance(x, ToolCall):
            x = {"name": x.name, "arguments": x.arguments}
        return (
            isinstance(x, Mapping)
            and isinstance(x.get("name"), str)
            and isinstance(x.get("arguments", {}), (Mapping, str))
        )

    def to_jsonable(self, sample_n: Iterable[Any]) -> list[Any]:
        return [json.loads(json.dumps(s if isinstance(s, Mapping) else s.__dict__)) for s in sample_n]

    def from_jsonable(self, sample_n: list[Any]) -> list[Any]:
        return list(sample_n)

    def __repr__(self) -> str:
        return f"ToolCallSpace({len(self.tool_names)} tools)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ToolCallSpace) and other.tool_names == self.tool_names


# -- Gymnasium vector envs: batches of object spaces, and shared-memory hooks ---------------------


class ObjectBatch(spaces.Tuple):
    """What ``batch_space`` makes of an object space: a Tuple of copies, as for any custom space,
    whose ``iterate`` (how a vector env splits a batch of actions) replaces an action that cannot
    be pickled -- a dict nested deeper than the recursion limit, say -- by the space's
    :meth:`ObjectSpace.unsendable` stand-in, which the env answers with an explanation. An async
    worker could not receive the action, and a failed send would leave the vector env out of step
    with its workers; sync and async vector envs answer alike."""


def _sendable(space: spaces.Space[Any], action: Any) -> Any:
    if type(action) is str or not isinstance(space, ObjectSpace):
        return action
    try:
        pickle.dumps(action, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as error:  # whatever the pickler objects to, the env gets an explanation
        return space.unsendable(type(error).__name__)
    return action


@batch_space.register(ObjectSpace)
def _batch_object_space(space: ObjectSpace, n: int = 1) -> ObjectBatch:
    return ObjectBatch(tuple(copy.deepcopy(space) for _ in range(n)), seed=copy.deepcopy(space.np_random))


# mypy cannot see a Tuple subclass as a Space[_T] for iterate's generic fallback
@iterate.register(ObjectBatch)
def _iterate_sendable(space: ObjectBatch, items: Iterable[Any]) -> Iterator[Any]:  # type: ignore[misc]
    return (_sendable(single, item) for single, item in zip(space.spaces, items, strict=False))


class ObservationFiles:
    """The observations of the ``n`` workers of an ``AsyncVectorEnv``, one file per env.

    Gymnasium's shared-memory hooks assume buffers of a size fixed by the space; text and message
    lists have no size bound. So each worker pickles its latest observation to its own file in a
    private temporary directory (written to a temporary name, then renamed, so a reader never sees
    half a file) and the main process reads it after the worker's reply. The directory is removed
    when the main process's handle is garbage collected or the interpreter exits.
    """

    def __init__(self, n: int, directory: str | None = None) -> None:
        self.n = n
        if directory is None:
            self.directory = tempfile.mkdtemp(prefix="ace-gym-observations-")
            # only the creating process removes it: forked workers inherit this finalizer
            weakref.finalize(self, _remove_directory, self.directory, os.getpid())
        else:
            self.directory = directory

    def __reduce__(self) -> tuple[Any, tuple[int, str]]:
        return ObservationFiles, (self.n, self.directory)  # a worker's copy: no finalizer

    def _path(self, index: int) -> str:
        return os.path.join(self.directory, f"{index}.pickle")

    def write(self, index: int, observation: Any) -> None:
        # a hand-off between live processes: no fsync needed
        write_atomic(
            self._path(index), partial(pickle.dump, observation, protocol=pickle.HIGHEST_PROTOCOL), durable=False
        )

    def read(self, index: int) -> Any:
        """Env ``index``'s latest observation; None before its first reset."""
        try:
            with open(self._path(index), "rb") as handle:
                return pickle.load(handle)
        except FileNotFoundError:
            return None


def _remove_directory(directory: str, owner_pid: int) -> None:
    if os.getpid() == owner_pid:
        shutil.rmtree(directory, ignore_errors=True)


class SharedObservations(Sequence[Any]):
    """The batch of observations an ``AsyncVectorEnv`` returns for an object space.

    With ``copy=True`` (the default) the vector env deep-copies it into a tuple, like the batch of
    a ``SyncVectorEnv``; with ``copy=False`` it is this live view, which shows the latest
    observations (read it before the next step).
    """

    def __init__(self, files: ObservationFiles) -> None:
        self.files = files

    def __len__(self) -> int:
        return self.files.n

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Any, ...]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return tuple(self.files.read(i) for i in range(self.files.n)[index])
        if not -self.files.n <= index < self.files.n:
            raise IndexError(index)
        return self.files.read(index % self.files.n)

    def __iter__(self) -> Iterator[Any]:
        return (self.files.read(i) for i in range(self.files.n))

    def __deepcopy__(self, memo: dict[int, Any]) -> tuple[Any, ...]:
        return tuple(self)

    def __repr__(self) -> str:
        return f"SharedObservations({list(self)!r})"


@create_shared_memory.register(ObjectSpace)
def _create_observation_files(space: ObjectSpace, n: int = 1, ctx: ModuleType | None = None) -> ObservationFiles:
    return ObservationFiles(n)


@read_from_shared_memory.register(ObjectSpace)
def _read_observation_files(space: ObjectSpace, shared_memory: ObservationFiles, n: int = 1) -> SharedObservations:
    return SharedObservations(shared_memory)


@write_to_shared_memory.register(ObjectSpace)
def _write_observation_file(space: ObjectSpace, index: int, value: Any, shared_memory: ObservationFiles) -> None:
    shared_memory.write(index, value)
