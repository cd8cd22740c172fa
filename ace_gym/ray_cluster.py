"""The one place ace-gym imports Ray and joins a cluster (the Ray back ends import it lazily).

:func:`connect` returns the ``ray`` module connected to a cluster: the one this process already
joined, else the one at ``address`` (``"auto"``, ``"ray://host:10001"``, ...; None reads the
``RAY_ADDRESS`` environment variable), else a local cluster started here. Every node must have
the same ace-gym importable, e.g. installed, or shipped through Ray's ``runtime_env``.
"""

from __future__ import annotations

from types import ModuleType

from ace_gym.errors import ConfigError


def connect(address: str | None = None) -> ModuleType:
    """The ``ray`` module, initialised (module docstring). ConfigError when ray is not installed."""
    try:
        import ray
    except ImportError as error:
        raise ConfigError(
            "backend", "ray", f"needs ray ({error}): pip install '.[ray]' in an ace-gym checkout"
        ) from None
    if not ray.is_initialized():
        ray.init(address=address)
    return ray
