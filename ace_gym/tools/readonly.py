"""Read-only JSON values: the tool schemas every episode shares.

:class:`ReadOnlyDict` and :class:`ReadOnlyList` are ``dict`` and ``list`` subclasses, so
everything that takes JSON takes them (``json.dumps``, orjson, jinja chat templates through
``tokenizer.apply_chat_template(tools=...)``, the OpenAI client, pydantic, ``==`` with plain
values), but every mutating method raises :class:`TypeError`. ``copy.deepcopy`` returns plain,
mutable dicts and lists; ``copy.copy``, ``dict(value)`` and ``list(value)`` a plain shallow copy;
pickling round-trips to read-only values (Ray, multiprocessing, ``AsyncVectorEnv``).
"""

from __future__ import annotations

import copy
from typing import Any, NoReturn

_COPY_FIRST = "is read-only (shared by every episode): copy.deepcopy(...) gives a mutable copy"


def _refuse(value: object, *args: object, **kwargs: object) -> NoReturn:
    raise TypeError(f"this {type(value).__name__} {_COPY_FIRST}")


class ReadOnlyDict(dict[str, Any]):
    """A ``dict`` that refuses changes (see the module docstring)."""

    __slots__ = ()

    def __new__(cls, items: Any = (), /) -> ReadOnlyDict:
        value = dict.__new__(cls)
        dict.update(value, items)
        return value

    def __init__(self, items: Any = (), /) -> None:
        """Filled by ``__new__``: calling ``__init__`` again changes nothing."""

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return {key: copy.deepcopy(item, memo) for key, item in self.items()}

    def __reduce__(self) -> tuple[type[ReadOnlyDict], tuple[dict[str, Any]]]:
        return ReadOnlyDict, (dict(self),)


class ReadOnlyList(list[Any]):
    """A ``list`` that refuses changes (see the module docstring)."""

    __slots__ = ()

    def __new__(cls, items: Any = (), /) -> ReadOnlyList:
        value = list.__new__(cls)
        list.extend(value, items)
        return value

    def __init__(self, items: Any = (), /) -> None:
        """Filled by ``__new__``: calling ``__init__`` again changes nothing."""

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(item, memo) for item in self]

    def __reduce__(self) -> tuple[type[ReadOnlyList], tuple[list[Any]]]:
        return ReadOnlyList, (list(self),)


def read_only(value: Any) -> Any:
    """``value`` (JSON's types) with every dict and list, at any depth, made read-only; strings,
    numbers, booleans and None as they are. TypeError for any other type."""
    if isinstance(value, dict):
        return ReadOnlyDict({key: read_only(item) for key, item in value.items()})
    if isinstance(value, list):
        return ReadOnlyList([read_only(item) for item in value])
    if value is None or isinstance(value, str | int | float):
        return value
    raise TypeError(f"no read-only JSON value for {type(value).__name__}")
