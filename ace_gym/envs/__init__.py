"""Gymnasium environments: :class:`AceEnv` (published and file datasets) and
:class:`ProceduralAceEnv` (generated instances).

``ProceduralAceEnv`` is imported on first access, so that ``import ace_gym`` does not load the
generator's numba kernels.
"""

from typing import TYPE_CHECKING, Any

from ace_gym.envs.ace_env import AceEnv

if TYPE_CHECKING:
    from ace_gym.envs.procedural import ProceduralAceEnv

__all__ = ["AceEnv", "ProceduralAceEnv"]


def __getattr__(name: str) -> Any:
    if name == "ProceduralAceEnv":
        from ace_gym.envs.procedural import ProceduralAceEnv

        globals()[name] = ProceduralAceEnv  # later lookups skip this hook
        return ProceduralAceEnv
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
