"""Gymnasium environments: :class:`AceEnv`, one class for published files, bundled data and
generated instances, which it draws from an injected :class:`InstanceSource`
(:class:`DatasetSource`, :class:`GeneratorSource`); :class:`ProceduralAceEnv` is ``AceEnv`` on a
``GeneratorSource``.

``GeneratorSource`` and ``ProceduralAceEnv`` are imported on first access, so that
``import ace_gym`` does not load the generator's numba kernels.
"""

from typing import TYPE_CHECKING, Any

from ace_gym.envs.ace_env import AceEnv, FinalScore
from ace_gym.envs.sources import DatasetSource, Drawn, InstanceSource

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
]
_LAZY = frozenset({"GeneratorSource", "ProceduralAceEnv"})


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from ace_gym.envs import procedural

        found = getattr(procedural, name)
        globals()[name] = found  # later lookups skip this hook
        return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
