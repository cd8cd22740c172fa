"""Moved to :mod:`ace_gym.domains.tool_names` (the tool names belong to the domain declarations,
below the prompts and the tool layer that use them); this name stays importable for one release."""

from ace_gym.lazy_exports import moved_module

__moved_to__ = "ace_gym.domains.tool_names"
__getattr__, __dir__ = moved_module(__name__, __moved_to__)
