"""Loading an engine's model: a model that does not load is an infrastructure failure, never a score."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

from ace_gym.errors import EngineUnavailableError

LOAD_ERRORS: tuple[type[Exception], ...] = (OSError, ValueError)
"""What the loaders raise for a model that is not there or not a model: a missing path or hub
repository, unreadable or incomplete files (OSError, the hub client's errors), a name that is no
valid repository id or a config of no known model type (ValueError)."""

_Loaded = TypeVar("_Loaded")


def loaded(
    what: str,
    source: str | os.PathLike[str],
    load: Callable[[], _Loaded],
    errors: tuple[type[Exception], ...] = LOAD_ERRORS,
) -> _Loaded:
    """``load()``; :class:`~ace_gym.errors.EngineUnavailableError` naming ``what`` (model,
    tokenizer) and ``source`` (its path or name) when it raises one of ``errors``."""
    try:
        return load()
    except errors as error:
        raise EngineUnavailableError(
            f"{what} {os.fspath(source)}", f"cannot load: {type(error).__name__}: {error}"
        ) from error
