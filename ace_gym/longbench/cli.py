"""Moved to :mod:`ace_gym.longbench.eval_options` (what ``ace-gym eval --env ALB-QA-v0`` adds; it
is no command of its own); this name stays importable for one release. Importing it warns
(DeprecationWarning), naming the new home; every name is looked up there."""

from __future__ import annotations

import importlib
import warnings
from typing import Any

__moved_to__ = "ace_gym.longbench.eval_options"
warnings.warn(f"{__name__} moved to {__moved_to__}; the old name goes in the next release", DeprecationWarning, 2)


def __getattr__(name: str) -> Any:  # the module hook's own name
    return getattr(importlib.import_module(__moved_to__), name)
