"""Where the first use of a dataset file goes, stage by stage, and the floor under it.

    python benchmarks/bench_first_load.py [--dataset 5x5] [--domain course] [--runs 20]

A file this machine has not validated before is hashed (its SHA-256 names its dataset-cache
entry, looked up first), read, parsed against the strict schema, screened
for repeated keys, checked for consistency (which compiles every instance), and its dataset-cache
entry texts are built and written. Each stage is timed on its own, interleaved with the others,
best of ``--runs`` (a shared machine only ever adds time); the last row is the whole first use,
``read_dataset`` into an empty cache folder with the per-process memo of file hashes cleared (as
in a new process), as ``bench_reference.py`` times it against the published release's loader
(which validates nothing and writes no cache).

Each row also prints its share of the whole first use, measured in the same run. The floor rows
are what any loader of the same file must spend: reading and gunzipping it, and
parsing its JSON (``pydantic_core.from_json``); a loader with our guarantees also runs the strict
schema (``DatasetFile.model_validate_json``, which includes the parse).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pydantic_core import from_json

from ace_gym.instance import (
    DatasetFile,
    bundled_dataset_path,
    check_dataset,
    entry_texts,
    forget_loaded_datasets,
    read_dataset,
)
from ace_gym.instance import cache as dataset_cache
from ace_gym.instance.loading import _file_sha256, _read_json_bytes
from ace_gym.instance.repeated_keys import _check_distinct_keys, _key_count_bound

WHOLE = "whole first use (read_dataset, empty cache)"
READ = "read + gunzip the file"
PARSE = "parse the JSON (pydantic_core.from_json)"
SCHEMA = "strict schema (model_validate_json)"


def stages(path: Path, scratch: Path) -> dict[str, Callable[[], object]]:
    """The stages of a first use of ``path``, each a callable run on its own (entries written under ``scratch``)."""
    size = path.stat().st_size
    raw = _read_json_bytes(path, size)
    model = DatasetFile.model_validate_json(raw)
    compiled = check_dataset(model, str(path))
    texts = list(map(entry_texts, compiled))
    header = model.model_dump(exclude={"instances"})
    instance_ids = [instance.instance_id for instance in model.instances]

    status = path.stat()
    file_key = (str(path), status.st_mtime_ns, status.st_size)

    def in_empty_cache(run: Callable[[], object]) -> Callable[[], object]:
        def fresh() -> object:
            os.environ["ACE_GYM_CACHE_DIR"] = tempfile.mkdtemp(dir=scratch)
            forget_loaded_datasets()  # a new process hashes the file to find its entry
            return run()

        return fresh

    def hash_file() -> object:
        forget_loaded_datasets()
        return _file_sha256(*file_key)

    return {
        "hash the file (SHA-256: its cache entry's name)": hash_file,
        READ: lambda: _read_json_bytes(path, size),
        PARSE: lambda: from_json(raw),
        SCHEMA: lambda: DatasetFile.model_validate_json(raw),
        "repeated-key screen": lambda: _check_distinct_keys(raw, _key_count_bound(raw), model, str(path)),
        "consistency checks + compile": lambda: check_dataset(model, str(path)),
        "cache entry texts": lambda: list(map(entry_texts, compiled)),
        "cache entry write": in_empty_cache(lambda: dataset_cache.write_entry("0" * 64, header, instance_ids, texts)),
        WHOLE: in_empty_cache(lambda: read_dataset(path)),
    }


def best_ms(timed: dict[str, Callable[[], object]], runs: int) -> dict[str, float]:
    """Best wall time of each callable, in ms, over ``runs`` interleaved rounds."""
    best = dict.fromkeys(timed, float("inf"))
    for _ in range(runs):
        for name, run in timed.items():
            start = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - start)
    return {name: seconds * 1e3 for name, seconds in best.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="5x5", help="bundled dataset name")
    parser.add_argument("--domain", default="course")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args(argv)
    path = bundled_dataset_path(args.dataset, args.domain)
    saved = os.environ.get("ACE_GYM_CACHE_DIR")
    with tempfile.TemporaryDirectory() as scratch:
        try:
            times = best_ms(stages(path, Path(scratch)), args.runs)
        finally:  # never leave the user's cache setting changed
            if saved is None:
                os.environ.pop("ACE_GYM_CACHE_DIR", None)
            else:
                os.environ["ACE_GYM_CACHE_DIR"] = saved
    read, parse, schema = times[READ], times[PARSE], times[SCHEMA]
    whole = times[WHOLE]
    times["floor: read + parse (any loader)"] = read + parse
    times["floor: read + strict schema (our guarantees)"] = read + schema
    print(f"first use of {path.name}, best of {args.runs} interleaved rounds; share of the whole first use")
    for name, ms in times.items():
        print(f"{name:48s} {ms:8.2f} ms {100 * ms / whole:6.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
