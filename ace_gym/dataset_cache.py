"""Moved to :mod:`ace_gym.instance.cache` (which holds the whole entry format); this name stays
importable for one release."""

from ace_gym.lazy_exports import moved_module

__moved_to__ = "ace_gym.instance.cache"
__getattr__, __dir__ = moved_module(__name__, __moved_to__)
