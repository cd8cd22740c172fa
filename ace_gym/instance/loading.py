"""Loading dataset files: the validated :class:`Dataset`, the per-process cache of loaded files
and their hashes, bundled names and path arguments (the rules a file must satisfy: :mod:`ace_gym.instance`)."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import stat
import threading
import zlib
from collections.abc import Mapping, Sequence
from functools import cache, lru_cache, partial
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ace_gym.domains import DOMAINS, Domain
from ace_gym.errors import ConfigError, DatasetError, did_you_mean
from ace_gym.instance.cache import CachedDataset, entry_header_problem, read_entry, write_entry
from ace_gym.instance.cached_instance import ItemRows, compiled_from_entry, entry_texts, instance_from_entry
from ace_gym.instance.compiled import CompiledInstance
from ace_gym.instance.parquet import (
    PARQUET_SUFFIX,
    holds_parquet,
    parquet_document,
    parquet_file_in,
    table_document,
    table_rows,
    table_source,
)
from ace_gym.instance.repeated_keys import _check_distinct_keys, _json_path, _key_count_bound
from ace_gym.instance.validation import check_dataset

if TYPE_CHECKING:
    from pydantic import ValidationError

    from ace_gym.dataset_schema import DatasetFile, Instance


class Dataset(Sequence["Instance"]):
    """A validated dataset file; compiled instances are cached (shared read-only).

    Built from a validated :class:`DatasetFile` (:func:`parse_dataset`: with the instances that
    validation compiled), or (:func:`load_dataset`, with the dataset cache on) from the file's
    entry in :mod:`ace_gym.instance.cache`: read back when the file was validated before, just
    written when it was validated now. Such a dataset's instances are compiled on first use from
    the compiled forms the entry holds (their pydantic models built from its JSON only when asked
    for), and it holds under half of its JSON's size in memory; its models would take about twice.
    """

    def __init__(
        self,
        model: DatasetFile,
        source: str,
        cache_key: tuple[Any, ...] | None = None,
        compiled: Sequence[CompiledInstance] = (),
    ) -> None:
        """``compiled``: the instances compiled (all of them, or none: compiled on first use)."""
        self._setup(model.domain, source, cache_key, tuple(i.instance_id for i in model.instances))
        self._instances: list[Instance | None] = list(model.instances)
        self._model: DatasetFile | None = model
        self._entry: CachedDataset | None = None
        for index, instance in enumerate(compiled):
            instance.origin = (self, index)
            self._compiled[index] = instance

    @classmethod
    def from_cache_entry(cls, entry: CachedDataset, source: str, cache_key: tuple[Any, ...] | None = None) -> Dataset:
        """The dataset of a file whose entry :func:`ace_gym.instance.cache.read_entry` returned."""
        dataset = cls.__new__(cls)
        dataset._setup(entry.header["domain"], source, cache_key, entry.instance_ids)
        dataset._instances = [None] * len(entry.instance_ids)
        dataset._model = None
        dataset._entry = entry
        return dataset

    def _setup(
        self, domain: str, source: str, cache_key: tuple[Any, ...] | None, instance_ids: tuple[str, ...]
    ) -> None:
        self.source = source
        self.domain: Domain = DOMAINS[domain]
        self._cache_key = cache_key
        self._compiled: dict[int, CompiledInstance] = {}
        self._lock = threading.RLock()  # compiled() builds the instance under it
        self.instance_ids: tuple[str, ...] = instance_ids
        self._index_of_id = {iid: k for k, iid in enumerate(self.instance_ids)}

    @property
    def model(self) -> DatasetFile:
        """The whole file as a :class:`DatasetFile` (every instance built)."""
        if self._model is None:
            from ace_gym.dataset_schema import DatasetFile

            assert self._entry is not None
            instances = [self[k] for k in range(len(self))]
            self._model = DatasetFile.model_construct(**self._entry.header, instances=instances)
        return self._model

    def __len__(self) -> int:
        return len(self.instance_ids)

    def __getitem__(self, index: int) -> Instance:  # type: ignore[override]
        if isinstance(index, slice):
            return [self[k] for k in range(len(self))[index]]  # type: ignore[return-value]
        found = self._instances[index]
        if found is None:
            with self._lock:
                found = self._instances[index]
                if found is None:
                    from pydantic_core import from_json

                    assert self._entry is not None  # built from the JSON that passed validation
                    compiled = self.compiled(index % len(self))
                    document = from_json(self._entry.instance_json(index % len(self)))
                    found = self._instances[index] = instance_from_entry(document, compiled)
        return found

    def index_of(self, instance_id: str) -> int:
        """Index of ``instance_id``; ConfigError with a suggestion when absent."""
        try:
            return self._index_of_id[instance_id]
        except (KeyError, TypeError):
            raise ConfigError(
                "instance_id",
                instance_id,
                f"not in {self.source}{did_you_mean(instance_id, self.instance_ids)}",
            ) from None

    def compiled(self, index: int) -> CompiledInstance:
        """The compiled form of instance ``index`` (built once per process)."""
        found = self._compiled.get(index)
        if found is None:
            with self._lock:
                found = self._compiled.get(index)
                if found is None:
                    found = self._compile(index)
                    found.origin = (self, index)
                    self._compiled[index] = found
        return found

    def _compile(self, index: int) -> CompiledInstance:
        instance = self._instances[index]
        if instance is not None:
            return CompiledInstance(instance, self.domain)
        assert self._entry is not None
        # json.loads, not pydantic_core's from_json: a set-up from the cache imports neither
        # pydantic_core nor pydantic
        return compiled_from_entry(
            json.loads(self._entry.compiled_json(index)),
            self.domain,
            partial(self.__getitem__, index),
            ItemRows(self._entry.data, self._entry.item_texts_start(index)),
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # a file-backed dataset re-opens from the per-process cache instead of pickling its data
        if self._cache_key is not None:
            return (load_dataset, (self.source,))
        return (Dataset, (self.model, self.source))


_CACHE: dict[tuple[int, int, int, int], Dataset] = {}  # by _file_identity
_CACHE_LOCK = threading.Lock()
BUNDLED_DATASETS: tuple[str, ...] = ("5x5", "5x7")
MAX_DATASET_BYTES = 256 * 2**20
"""The largest dataset accepted: bytes of JSON, counted after decompression for ``.json.gz``."""
_READ_CHUNK = 2**20


@cache  # the package's data does not change while it runs
def bundled_dataset_path(name: str, domain: str) -> Path:
    """Path of the bundled dataset ``name`` (e.g. "5x5") for ``domain``; ConfigError if unknown."""
    if name not in BUNDLED_DATASETS:
        raise ConfigError(
            "dataset",
            name,
            f"not a bundled dataset ({', '.join(BUNDLED_DATASETS)}){did_you_mean(name, BUNDLED_DATASETS)}",
        )
    folder = resources.files("ace_gym") / "data" / name
    for entry in folder.iterdir():
        if entry.name.startswith(f"{domain}_dataset_"):
            return Path(str(entry))
    raise ConfigError("domain", domain, f"bundled dataset {name} has no file for this domain")


def resolve_dataset(dataset: str | os.PathLike[str] | Any, domain: str) -> Dataset:
    """Load ``dataset`` and check it is of ``domain``: a bundled name, a dataset file path (JSON,
    ``.json.gz``, or ``.parquet`` as ``ace-gym hub export`` writes it), a folder of exported rows
    (a config's folder, or the export's folder when it holds one config of ``domain``), or the
    rows themselves (a ``datasets.Dataset``, or a ``DatasetDict`` of one split). Rows go through
    the validation a JSON file goes through (:mod:`ace_gym.instance.parquet`).

    A regular file, or a folder holding exported rows, at the path wins over a bundled name of
    the same spelling (a folder holding none does not). ConfigError naming
    the value and the path when it is neither (missing, a folder of no exported rows, a FIFO, a
    name the system refuses, not a str, path or table); DatasetError for a broken file or table
    (see :func:`load_dataset`).
    """
    if not isinstance(dataset, (str, os.PathLike)) and (
        isinstance(dataset, Mapping) or hasattr(dataset, "column_names")
    ):
        table = table_rows(dataset)
        source = table_source(table)
        loaded = parse_dataset(_within_limit(table_document(table, source), source), source)
        return _of_domain(loaded, domain, source)
    path = _path_argument("dataset", dataset, f"a bundled dataset name ({', '.join(BUNDLED_DATASETS)}) or a file path")
    bundled = str(path) in BUNDLED_DATASETS
    if os.path.isfile(path):
        loaded = load_dataset(path)
    elif os.path.isdir(path) and not (bundled and not holds_parquet(path)):
        loaded = load_dataset(parquet_file_in(path, domain, dataset))
    elif bundled:
        loaded = load_dataset(bundled_dataset_path(str(path), domain))
    else:
        raise ConfigError(
            "dataset",
            dataset,
            f"{_not_a_regular_file(path)}, and not a bundled dataset ({', '.join(BUNDLED_DATASETS)})"
            f"{did_you_mean(str(path), BUNDLED_DATASETS)}",
        )
    return _of_domain(loaded, domain, str(dataset))


def _of_domain(loaded: Dataset, domain: str, dataset: str) -> Dataset:
    """``loaded``; ConfigError naming ``dataset`` when it holds another domain than ``domain``."""
    if loaded.domain.name != domain:
        raise ConfigError("dataset", dataset, f"holds domain {loaded.domain.name!r}, not {domain!r}")
    return loaded


def dataset_sha256(dataset: str | os.PathLike[str], domain: str) -> str:
    """SHA-256 (hex) of the bytes of the file ``dataset`` names for ``domain`` (resolved as
    :func:`resolve_dataset` does; a ``.gz`` file's bytes as stored): what a replay checks to know
    it plays the same instances. Hashed once per file version and process."""
    loaded = resolve_dataset(dataset, domain)  # the file's current version: its path, mtime and size
    assert loaded._cache_key is not None  # a file's dataset always has one
    return _file_sha256(*loaded._cache_key)


def forget_loaded_datasets() -> None:
    """Forget the datasets :func:`load_dataset` keeps for the process and the files' hashes: the
    next load of any file reads and hashes it again (then reads its on-disk cache entry when this
    machine validated it before), as a new process does. A dataset or env made before keeps what
    it holds. For a long run that loads many files (each is otherwise kept until the process
    ends), and for measuring a first load."""
    with _CACHE_LOCK:
        _CACHE.clear()
    _file_sha256.cache_clear()


@lru_cache(maxsize=64)
def _file_sha256(path: str, mtime_ns: int, size: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(_READ_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def load_dataset(path: str | os.PathLike[str]) -> Dataset:
    """Validate and load a dataset file (``.json``, ``.json.gz``, or exported rows in ``.parquet``:
    :mod:`ace_gym.instance.parquet`), once per process.

    Raises ConfigError when ``path`` names no regular file (naming it), and DatasetError
    (naming file, JSON path and problem) for a file that cannot be read, holds more than
    :data:`MAX_DATASET_BYTES` of JSON (a ``.gz`` file is decompressed in chunks and abandoned at
    the limit), or breaks the schema or a consistency rule of the module docstring. Nothing is
    cached for a broken file.
    """
    given = _path_argument("path", path, "a file path")
    with contextlib.suppress(OSError, ValueError):  # else _dataset_file names the problem
        with _CACHE_LOCK:
            cached = _CACHE.get(_file_identity(given.stat()))
        if cached is not None:
            return cached
    resolved, status = _dataset_file(given)
    dataset = _read_dataset(resolved, status)
    with _CACHE_LOCK:
        return _CACHE.setdefault(_file_identity(status), dataset)


def _file_identity(status: os.stat_result) -> tuple[int, int, int, int]:
    """The key of a file version in the per-process cache: which file (device, inode), whatever
    path or link names it, and its version (modification time, size)."""
    return (status.st_dev, status.st_ino, status.st_mtime_ns, status.st_size)


def read_dataset(path: str | os.PathLike[str]) -> Dataset:
    """Validate and load a dataset file as :func:`load_dataset` does, without its per-process cache.

    A file whose bytes this machine validated before under the same rules is not parsed again:
    its instances come from the entry :mod:`ace_gym.instance.cache` wrote then, each built on
    first use. Any other file is validated in full and, once it passes, its entry written; the
    dataset returned is then read from that entry too (with the cache off: from the validated models).
    """
    return _read_dataset(*_dataset_file(path))


def _dataset_file(path: object) -> tuple[Path, os.stat_result]:
    """The resolved path and status of the regular file ``path`` names; ConfigError otherwise."""
    path = _path_argument("path", path, "a file path")
    problem = _not_a_regular_file(path)
    if problem is not None:
        raise ConfigError("path", str(path), problem)
    path = Path(os.path.realpath(path))  # what Path.resolve() does, without its pathlib layers
    return path, path.stat()


def _read_dataset(path: Path, status: os.stat_result) -> Dataset:
    key = (str(path), status.st_mtime_ns, status.st_size)
    digest = None
    if path.suffix in (".gz", PARQUET_SUFFIX) or status.st_size <= MAX_DATASET_BYTES:  # larger: refused unread below
        with contextlib.suppress(OSError):  # unreadable: _read_json_bytes names the problem
            digest = _file_sha256(*key)
    entry = None if digest is None else read_entry(digest, entry_header_problem)
    if entry is not None:
        return Dataset.from_cache_entry(entry, str(path), cache_key=key)
    if path.suffix == PARQUET_SUFFIX:
        document: bytes | bytearray = _within_limit(parquet_document(path, MAX_DATASET_BYTES), str(path))
    else:
        document = _read_json_bytes(path, status.st_size)
    dataset = parse_dataset(document, str(path), cache_key=key)
    if digest is not None and _unchanged(path, status):
        model = dataset.model
        written = write_entry(
            digest,
            model.model_dump(exclude={"instances"}),
            dataset.instance_ids,
            map(entry_texts, map(dataset.compiled, range(len(dataset)))),
        )
        if written is not None:  # held as a later process holds it: a quarter of the models' memory
            return Dataset.from_cache_entry(written, str(path), cache_key=key)
    return dataset


def _unchanged(path: Path, status: os.stat_result) -> bool:
    """Whether ``path`` still has the size and modification time of ``status``."""
    try:
        now = path.stat()
    except OSError:
        return False
    return (now.st_mtime_ns, now.st_size) == (status.st_mtime_ns, status.st_size)


def _path_argument(field: str, value: object, expected: str) -> Path:
    """``value`` as a Path if it is a str or str path; ConfigError naming ``field`` otherwise."""
    text = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
    if not isinstance(text, str):
        raise ConfigError(field, value, f"must be {expected} (str or os.PathLike), not {type(value).__name__}")
    if not text or "\0" in text:
        raise ConfigError(field, value, f"must be {expected}, {'not empty' if not text else 'without NUL characters'}")
    return Path(text)


def _not_a_regular_file(path: Path) -> str | None:
    """Why ``path`` cannot be read as a dataset file (naming the absolute path of a relative
    one), or None if it is a regular file."""
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return f"no such file{_absolute_note(path)}"
    except OSError as error:
        return f"cannot be opened{_absolute_note(path)}: {error.strerror or error}"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return f"is a directory{_absolute_note(path)}, not a dataset file"
    return f"is not a regular file{_absolute_note(path)}"


def _absolute_note(path: Path) -> str:
    """`` (/absolute/path)`` for a relative path, for error messages; empty for an absolute one."""
    return "" if path.is_absolute() else f" ({path.absolute()})"


def _within_limit(document: bytes, source: str) -> bytes:
    """``document`` (assembled from exported rows); DatasetError when it exceeds MAX_DATASET_BYTES."""
    if len(document) > MAX_DATASET_BYTES:
        raise DatasetError(source, "$", f"holds more than MAX_DATASET_BYTES = {MAX_DATASET_BYTES} bytes of JSON")
    return document


def _read_json_bytes(path: Path, size: int) -> bytearray:
    """The file's JSON text (gunzipped for ``.gz``), read in chunks that stop at MAX_DATASET_BYTES."""
    limit, source, packed = MAX_DATASET_BYTES, str(path), path.suffix == ".gz"
    too_large = DatasetError(
        source,
        "$",
        f"holds more than MAX_DATASET_BYTES = {limit} bytes of JSON{' once decompressed' if packed else ''}",
    )
    if not packed and size > limit:
        raise too_large
    data = bytearray()  # grows in place: no second copy of the text, unlike joining chunks
    try:
        with gzip.open(path, "rb") if packed else path.open("rb") as stream:
            while chunk := stream.read(_READ_CHUNK):
                data += chunk
                if len(data) > limit:
                    raise too_large
    except (gzip.BadGzipFile, EOFError, zlib.error) as error:
        raise DatasetError(source, "$", f"not a valid gzip file ({error})") from None
    except OSError as error:
        raise DatasetError(source, "$", f"cannot be read ({error.strerror or error})") from None
    return data


def parse_dataset(raw: bytes | bytearray | str, source: str, cache_key: tuple[Any, ...] | None = None) -> Dataset:
    """Validate a dataset from JSON text; ``source`` names it in errors."""
    from pydantic import ValidationError

    from ace_gym.dataset_schema import DatasetFile

    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    key_bound = _key_count_bound(data)  # before the model exists: its scratch arrays add no peak memory
    try:
        model = DatasetFile.model_validate_json(raw)
    except ValidationError as error:
        raise _first_problem(error, raw, source) from None
    _check_distinct_keys(data, key_bound, model, source)
    compiled = check_dataset(model, source)
    return Dataset(model, source, cache_key, compiled)


def _first_problem(error: ValidationError, raw: bytes | bytearray | str, source: str) -> DatasetError:
    """The first validation problem at its path in the JSON document, with every message there.

    pydantic adds union-member tags (``int``, ``str``, ``list[str]``) to ``loc`` and reports one
    error per member; they are not part of the document, so the path is cut where the document
    ends and the members' messages are joined.
    """
    try:
        document: Any = json.loads(raw)
    except (ValueError, RecursionError):
        document = None
    problems = error.errors()
    located = [(_document_loc(p["loc"], p["type"], document), p["msg"]) for p in problems]
    first = located[0][0]
    messages = dict.fromkeys(msg for loc, msg in located if loc == first)
    return DatasetError(source, _json_path(first), "; ".join(messages))


def _document_loc(loc: Sequence[int | str], error_type: str, document: Any) -> tuple[int | str, ...]:
    if document is None:
        return tuple(loc)
    node, kept = document, []
    for k, part in enumerate(loc):
        if isinstance(node, dict) and isinstance(part, str) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            if error_type == "missing" and k == len(loc) - 1 and isinstance(node, dict):
                kept.append(part)  # a required key absent from the document
            break
        kept.append(part)
    return tuple(kept)
