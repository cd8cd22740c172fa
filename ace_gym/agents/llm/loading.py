"""Loading an engine's model: a model that does not load is an infrastructure failure, never a score."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

from ace_gym.errors import EngineUnavailableError

LOAD_ERRORS: tuple[type[Exception], ...] = (OSError,)
"""What the loaders raise for a model that is not there or cannot be read: a missing path or hub
repository, a name that is no valid repository id, unreadable or incomplete files (OSError and
its subclasses, the Hugging Face hub client's errors among them)."""

NOT_A_MODEL_MESSAGES = (
    "Unrecognized model in",  # transformers: a folder with no config.json, or one of no model type
    "Invalid repository ID or local directory",  # vLLM: no model config in that folder or repository
    "is not a valid model identifier",  # transformers
    "does not appear to have a file named",  # transformers
    "Repo id must be in the form",  # the hub client: a path that does not exist, read as a repository id
    "Couldn't instantiate the backend tokenizer",  # transformers: a folder without tokenizer files
)
"""What the ValueErrors the loaders raise for a folder or name that holds no model (or no
tokenizer) start with or contain; any other ValueError (a bad dtype, an impossible
``max_model_len``) is a configuration mistake and propagates as it is."""

_Loaded = TypeVar("_Loaded")


def is_load_failure(error: BaseException) -> bool:
    """Whether ``error`` says the model or tokenizer could not be found or read (see :data:`LOAD_ERRORS`
    and :data:`NOT_A_MODEL_MESSAGES`), as opposed to a configuration it was loaded with."""
    if isinstance(error, LOAD_ERRORS):
        return True
    return isinstance(error, ValueError) and any(text in str(error) for text in NOT_A_MODEL_MESSAGES)


def loaded(what: str, source: str | os.PathLike[str], load: Callable[[], _Loaded]) -> _Loaded:
    """``load()``; :class:`~ace_gym.errors.EngineUnavailableError` naming ``what`` (model,
    tokenizer) and ``source`` (its path or name) when what it raises :func:`is_load_failure`;
    any other error propagates unchanged."""
    try:
        return load()
    except Exception as error:
        if not is_load_failure(error):
            raise
        raise EngineUnavailableError(
            f"{what} {os.fspath(source)}", f"cannot load: {type(error).__name__}: {error}"
        ) from error
