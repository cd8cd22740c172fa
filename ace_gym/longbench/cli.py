"""Moved to :mod:`ace_gym.longbench.eval_options` (what ``ace-gym eval --env ALB-QA-v0`` adds; it
is no command of its own). This name stays importable for one release."""

from __future__ import annotations

from ace_gym.longbench.eval_options import (
    ENV_CHOICES,
    add_arguments,
    build_specs,
    refuse_mixing,
    run_identity,
    selection,
)

__moved_to__ = "ace_gym.longbench.eval_options"
__all__ = ["ENV_CHOICES", "add_arguments", "build_specs", "refuse_mixing", "run_identity", "selection"]
