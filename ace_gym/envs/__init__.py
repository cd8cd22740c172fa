"""Gymnasium environments: :class:`AceEnv`, one class for published files, bundled data and
generated instances, which it draws from an injected :class:`InstanceSource`
(:class:`DatasetSource`, :class:`GeneratorSource`); :class:`ProceduralAceEnv` is ``AceEnv`` on a
``GeneratorSource``.

``GeneratorSource`` and ``ProceduralAceEnv`` are imported on first access, so that
``import ace_gym`` does not load the generator's numba kernels.
"""

from typing import TYPE_CHECKING

from ace_gym.envs.ace_env import AceEnv, FinalScore, forget_stored_replies
from ace_gym.envs.sources import DatasetSource, Drawn, InstanceSource
from ace_gym.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from ace_gym.envs.procedural import GeneratorSource, ProceduralAceEnv

__all__ = [
    "AceEnv",
    "DatasetSource",
    "Drawn",
    "FinalScore",
    "GeneratorSource",
    "InstanceSource",
    "ProceduralAceEnv",
    "forget_stored_replies",
]
__getattr__, __dir__ = lazy_exports(__name__, "ace_gym.envs.procedural", ["GeneratorSource", "ProceduralAceEnv"])
