"""The cache of validated dataset files, now :mod:`ace_gym.instance.cache` (which holds the whole
entry format); this module keeps its names importable for one release."""

from ace_gym.instance.cache import (
    LAYOUT,
    MAX_ENTRY_BYTES,
    CachedDataset,
    cache_folder,
    read_entry,
    validator_fingerprint,
    write_entry,
)

__all__ = [
    "LAYOUT",
    "MAX_ENTRY_BYTES",
    "CachedDataset",
    "cache_folder",
    "read_entry",
    "validator_fingerprint",
    "write_entry",
]
