"""Moved to :mod:`ace_gym.longbench.eval_options` (what ``ace-gym eval --env ALB-QA-v0`` adds; it
is no command of its own); this name stays importable for one release."""

from ace_gym.lazy_exports import moved_module

__moved_to__ = "ace_gym.longbench.eval_options"
__getattr__, __dir__ = moved_module(__name__, __moved_to__)
