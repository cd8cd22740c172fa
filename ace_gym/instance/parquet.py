"""The published format as rows of a table (parquet, a Hugging Face ``datasets.Dataset``): one
row per instance, written by ``ace-gym hub export`` (:mod:`ace_gym.hub`) and read back into the
JSON document of a dataset file, which :func:`ace_gym.instance.parse_dataset` then validates as
it validates any file (one schema, one set of checks).

A row holds :data:`COLUMNS`: ``instance`` (the instance as JSON text, the published fields in
published order), ``dataset_header`` (the file's other fields as JSON text, the same in every
row), ``instance_index`` (its position in the file: rows are read in this order, whatever order
the table holds them in, each index once; a filtered table holds some of them, and its
instances are its rows in this order) and, to filter and browse by,
``instance_id``, ``domain``, ``rows``, ``cols``, ``hidden_slots`` (H) and ``decoy_budget`` (B),
which must agree with the instance's JSON. Other columns (an exported ``episode``) are ignored.

A problem is one :class:`~ace_gym.errors.DatasetError` naming the table (a parquet file's path,
or the ``datasets.Dataset``'s config and cache file), the column and row, or the JSON path in the
assembled document (``$.instances[k]`` is the row whose ``instance_index`` is ``k``). pyarrow is
imported only to read a parquet file.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ace_gym.errors import ConfigError, DatasetError

PARQUET_SUFFIX = ".parquet"
COLUMNS: tuple[str, ...] = (
    "instance_index",
    "instance_id",
    "domain",
    "rows",
    "cols",
    "hidden_slots",
    "decoy_budget",
    "instance",
    "dataset_header",
)
"""The columns every row holds, in the order an export writes them."""
TEXT_COLUMNS = ("instance_id", "domain", "instance", "dataset_header")
"""The columns of :data:`COLUMNS` that hold text."""

# browse column -> where the instance's JSON holds the same value
_AGREEING: dict[str, tuple[str, ...]] = {
    "instance_id": ("instance_id",),
    "domain": ("domain",),
    "rows": ("meta", "rows"),
    "cols": ("meta", "cols"),
    "hidden_slots": ("meta", "hidden_slots"),
    "decoy_budget": ("meta", "branch_budget"),
}


def dataset_columns(header: Mapping[str, Any], instance_texts: Sequence[str]) -> dict[str, list[Any]]:
    """The rows of one dataset file, by column (:data:`COLUMNS`): ``header`` is the file's fields
    but ``instances``, ``instance_texts`` its instances as JSON text, in file order."""
    header_text = json.dumps(dict(header), ensure_ascii=False)
    columns: dict[str, list[Any]] = {name: [] for name in COLUMNS}
    for index, text in enumerate(instance_texts):
        document = json.loads(text)
        columns["instance_index"].append(index)
        for name, path in _AGREEING.items():
            columns[name].append(_at(document, path))
        columns["instance"].append(text)
        columns["dataset_header"].append(header_text)
    return columns


def document_from_columns(column: Callable[[str], Sequence[Any] | None], source: str) -> bytes:
    """The JSON document of the dataset file whose rows ``column(name)`` gives (None for a column
    the table lacks), for :func:`~ace_gym.instance.parse_dataset`. DatasetError naming ``source``
    for a missing column or value, an ``instance_index`` that is negative, no integer, repeated or
    past the header's ``num_instances`` (the instances are the rows in ``instance_index`` order:
    a filtered table's, some of a file's, counted in ``num_instances``), rows of different
    headers, text that is no JSON object or a browse column that disagrees with the instance."""
    values = {name: _column(column, name, source) for name in COLUMNS}
    count = len(values["instance"])
    if count == 0:
        raise DatasetError(source, "column 'instance'", "holds no rows")
    order = _row_order(values["instance_index"], source)
    first = values["instance_index"][order[0]]
    header_text = values["dataset_header"][order[0]]
    header = _json_object(header_text, source, f"column 'dataset_header' (instance_index {first})", distinct_keys=True)
    parts = []
    for position, row in enumerate(order):
        index = values["instance_index"][row]
        if values["dataset_header"][row] != header_text:
            raise DatasetError(
                source, f"column 'dataset_header' (instance_index {index})", f"differs from instance_index {first}'s"
            )
        text = values["instance"][row]
        document = _json_object(text, source, f"$.instances[{position}] (column 'instance')")
        for name, path in _AGREEING.items():
            stated = _at(document, path)
            if stated is not None and values[name][row] != stated:
                raise DatasetError(
                    source,
                    f"column {name!r} (instance_index {index})",
                    f"is {values[name][row]!r} but the instance's {'.'.join(path)} is {stated!r}",
                )
        parts.append(text)
    header.pop("instances", None)  # the rows are the instances
    total = header.get("num_instances")
    if type(total) is int:  # else validation names it
        beyond = [row for row in order if values["instance_index"][row] >= total]
        if beyond:
            raise DatasetError(
                source,
                f"column 'instance_index' (row {beyond[0]})",
                f"{values['instance_index'][beyond[0]]} is not in 0..{total - 1} (the file's num_instances)",
            )
        header["num_instances"] = len(order)  # fewer in a filtered table
    opening = json.dumps(header, ensure_ascii=False)[:-1]
    return f'{opening}{", " if header else ""}"instances": [{", ".join(parts)}]}}'.encode("utf-8", "surrogatepass")


def table_source(table: Any) -> str:
    """How errors name a ``datasets.Dataset`` (its config and the file it was loaded from)."""
    info = getattr(table, "info", None)
    config = getattr(info, "config_name", None)
    files = [entry.get("filename") for entry in getattr(table, "cache_files", None) or () if isinstance(entry, dict)]
    named = ", ".join(str(f) for f in files if f) or "in memory"
    return f"datasets.Dataset(config={config!r}, file={named})"


def table_rows(table: Any) -> Any:
    """The one table of rows ``table`` holds: a ``datasets.Dataset`` or pyarrow Table as given,
    the only split of a ``DatasetDict``; ConfigError for a mapping of several splits or an object
    with no columns."""
    if isinstance(table, Mapping):
        if len(table) != 1:
            raise ConfigError("dataset", f"DatasetDict({sorted(table)})", "holds several splits: pass one")
        table = next(iter(table.values()))
    if not isinstance(getattr(table, "column_names", None), list):
        raise ConfigError("dataset", table, "is not a datasets.Dataset or a table of exported rows")
    return table


def table_document(table: Any, source: str) -> bytes:
    """The JSON document of the rows of ``table`` (a ``datasets.Dataset`` or pyarrow Table);
    DatasetError naming the column (and row) for a column name the table repeats or a string
    that is not valid UTF-8, besides :func:`document_from_columns`' problems."""
    names = list(table.column_names)
    _refuse_repeated_columns(names, source)

    def column(name: str) -> Sequence[Any] | None:
        if name not in names:
            return None
        try:
            values = table[name]
            return values.to_pylist() if hasattr(values, "to_pylist") else list(values)
        except UnicodeDecodeError as error:
            row = _undecodable_row(table, name)
            where = f"column {name!r}" if row is None else f"column {name!r} (row {row})"
            raise DatasetError(source, where, f"is not valid UTF-8 ({error.reason} at byte {error.start})") from None

    return document_from_columns(column, source)


def parquet_document(path: Path, max_bytes: int) -> bytes:
    """The JSON document of the parquet file at ``path``; DatasetError naming the file when it is
    no parquet file, its rows are broken, or the columns it is assembled from would decode to more
    than ``max_bytes``: told first from the file's metadata (their uncompressed size), then from
    the columns read with their strings dictionary-encoded as stored (a short file whose rows
    repeat one long string), never by materialising them; ConfigError when pyarrow is not installed."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError("dataset", str(path), 'reading parquet needs pyarrow: pip install ".[hub]"') from None
    source = str(path)
    try:
        parquet = pq.ParquetFile(path)
        names = parquet.schema_arrow.names
        metadata = parquet.metadata
        stored: Counter[str] = Counter()  # uncompressed bytes by column, over the row groups
        for group in map(metadata.row_group, range(metadata.num_row_groups)):
            for index in range(group.num_columns):
                stored[group.column(index).path_in_schema] += group.column(index).total_uncompressed_size
    except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid is a ValueError
        raise DatasetError(source, "$", f"not a readable parquet file ({error})") from None
    _refuse_repeated_columns(names, source)
    wanted = [name for name in COLUMNS if name in names]
    _refuse_over(sum(stored.get(name, 0) for name in wanted), max_bytes, source, "uncompressed in the file")
    texts = [name for name in TEXT_COLUMNS if name in wanted]  # read as stored: each string once, by index
    try:
        table = pq.ParquetFile(path, read_dictionary=texts).read(columns=wanted)
    except (OSError, ValueError) as error:
        raise DatasetError(source, "$", f"not a readable parquet file ({error})") from None
    _refuse_over(sum(_decoded_bytes(table[name]) for name in wanted), max_bytes, source, "once decoded")
    return table_document(table, source)


def _refuse_repeated_columns(names: Sequence[str], source: str) -> None:
    repeated = [name for name, count in Counter(names).items() if count > 1]
    if repeated:
        raise DatasetError(
            source, f"column {repeated[0]!r}", f"appears {names.count(repeated[0])} times: a table holds each once"
        )


def _refuse_over(size: int, max_bytes: int, source: str, how: str) -> None:
    if size > max_bytes:
        raise DatasetError(
            source, "$", f"its columns hold {size} bytes {how}, more than MAX_DATASET_BYTES = {max_bytes}"
        )


def _is_text(kind: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


def _decoded_bytes(values: Any) -> int:
    """The bytes a pyarrow column's values take decoded (a string's UTF-8 bytes once per row),
    counted without decoding: a dictionary-encoded chunk sums its entries' lengths by index."""
    import pyarrow as pa
    import pyarrow.compute as pc

    total = 0
    for chunk in values.chunks:
        if pa.types.is_dictionary(chunk.type):
            if _is_text(chunk.type.value_type):
                total += pc.sum(pc.take(pc.binary_length(chunk.dictionary), chunk.indices)).as_py() or 0
            else:
                total += chunk.dictionary.nbytes + chunk.indices.nbytes
        elif _is_text(chunk.type):
            total += pc.sum(pc.binary_length(chunk)).as_py() or 0
        else:
            total += chunk.nbytes
    return total


def _undecodable_row(table: Any, name: str) -> int | None:
    """The first row of a pyarrow ``table``'s column ``name`` that is no valid UTF-8; None when
    the table is no pyarrow table (a ``datasets.Dataset`` names no row)."""
    try:
        values = table[name]
    except UnicodeDecodeError:  # a datasets.Dataset decodes the column as it hands it over
        return None
    if not hasattr(values, "chunks"):
        return None
    for row in range(len(values)):
        try:
            values[row].as_py()
        except UnicodeDecodeError:
            return row
    return None


def holds_parquet(folder: Path) -> bool:
    """Whether ``folder`` holds exported rows: a ``*.parquet`` file in it or in a subfolder."""
    return any(folder.glob(f"*{PARQUET_SUFFIX}")) or any(folder.glob(f"*/*{PARQUET_SUFFIX}"))


def parquet_file_in(folder: Path, domain: str, given: object) -> Path:
    """The parquet file of ``domain`` in ``folder``: its one ``*.parquet`` file (a config's
    folder), else the one file of the one subfolder named ``<domain>_...`` (an export's folder,
    one config of the domain); ConfigError naming ``given`` and the choices otherwise."""
    files = sorted(folder.glob(f"*{PARQUET_SUFFIX}"))
    if not files:
        configs = sorted(
            sub
            for sub in folder.iterdir()
            if sub.is_dir() and sub.name.startswith(f"{domain}_") and any(sub.glob(f"*{PARQUET_SUFFIX}"))
        )
        if len(configs) > 1:
            names = ", ".join(os.path.join(str(given), sub.name) for sub in configs)
            raise ConfigError("dataset", given, f"holds several configs of domain {domain!r}: pass one of {names}")
        if not configs:
            raise ConfigError(
                "dataset", given, f"is a directory holding no {PARQUET_SUFFIX} file nor a config of domain {domain!r}"
            )
        files = sorted(configs[0].glob(f"*{PARQUET_SUFFIX}"))
    if len(files) > 1:
        raise ConfigError("dataset", given, f"holds {len(files)} parquet files ({files[0].name}, ...): expected one")
    return files[0]


def _column(column: Callable[[str], Sequence[Any] | None], name: str, source: str) -> Sequence[Any]:
    values = column(name)
    if values is None:
        raise DatasetError(source, f"column {name!r}", f"missing (a row holds {', '.join(COLUMNS)})")
    for row, value in enumerate(values):
        if value is None:
            raise DatasetError(source, f"column {name!r} (row {row})", "is null")
    return values


def _row_order(indices: Sequence[Any], source: str) -> list[int]:
    """The rows in ``instance_index`` order; DatasetError unless every index is a non-negative
    integer, each once. The indices need not be ``0 .. n-1``: a filtered table
    (``load_dataset(...).filter(...)``) holds some of a file's instances."""
    rows: dict[int, int] = {}
    for row, index in enumerate(indices):
        if type(index) is not int or index < 0:
            raise DatasetError(source, f"column 'instance_index' (row {row})", f"{index!r} is no non-negative integer")
        if index in rows:
            raise DatasetError(source, f"column 'instance_index' (row {row})", f"{index} appears twice")
        rows[index] = row
    return [rows[index] for index in sorted(rows)]


def _json_object(text: Any, source: str, where: str, distinct_keys: bool = False) -> dict[str, Any]:
    """``text`` parsed as a JSON object; DatasetError naming ``where`` otherwise, and, with
    ``distinct_keys``, for an object that repeats a key (text re-encoded after parsing would keep
    only its last value, where the dataset validation refuses it)."""
    if not isinstance(text, str):
        raise DatasetError(source, where, f"must be JSON text, not {type(text).__name__}")
    try:
        document = json.loads(text, object_pairs_hook=_distinct_keys(source, where) if distinct_keys else None)
    except DatasetError:
        raise
    except (ValueError, RecursionError) as error:
        raise DatasetError(source, where, f"is not valid JSON ({error})") from None
    if not isinstance(document, dict):
        raise DatasetError(source, where, f"must be a JSON object, not {type(document).__name__}")
    return document


def _distinct_keys(source: str, where: str) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    def distinct(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        document = dict(pairs)
        if len(document) < len(pairs):
            repeated = next(key for key, count in Counter(key for key, _ in pairs).items() if count > 1)
            raise DatasetError(source, where, f"repeats the key {repeated!r}")
        return document

    return distinct


def _at(document: Any, path: tuple[str, ...]) -> Any:
    """The value at ``path`` in ``document``, None where there is none (validation names that)."""
    for key in path:
        if not isinstance(document, dict):
            return None
        document = document.get(key)
    return document
