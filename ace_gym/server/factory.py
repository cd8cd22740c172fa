"""What a server may build for a session: served env ids, allowed wrappers, readable datasets."""

from __future__ import annotations

import inspect
import os
from collections.abc import Sequence
from pathlib import Path

import gymnasium as gym

import ace_gym.feedback
import ace_gym.planning
import ace_gym.wrappers
from ace_gym.errors import ConfigError, did_you_mean
from ace_gym.instance import BUNDLED_DATASETS
from ace_gym.registration import ENV_IDS, registered_env_ids
from ace_gym.server.protocol import MakeRequest, ProtocolError

WRAPPERS: dict[str, type[gym.Wrapper]] = {
    name: obj
    for module in (ace_gym.wrappers, ace_gym.planning, ace_gym.feedback)
    for name in sorted(module.__all__)
    if inspect.isclass(obj := getattr(module, name)) and issubclass(obj, gym.Wrapper)
}
"""Wrappers a session may stack, by class name: every wrapper :mod:`ace_gym.wrappers`,
:mod:`ace_gym.planning` and :mod:`ace_gym.feedback` export."""


class EnvFactory:
    """Builds session envs with ``gym.make`` from plain JSON arguments.

    ``env_ids`` are the served ids, the first one the default (default: every id ace_gym
    registers, the ``ACE-<domain>-v0`` ids first); ConfigError for an id that is not registered. A ``dataset`` argument may name a bundled dataset or a file inside
    one of ``data_dirs``: clients never make the server read anything else.
    """

    def __init__(self, env_ids: Sequence[str] | None = None, data_dirs: Sequence[str | os.PathLike[str]] = ()) -> None:
        known = registered_env_ids()
        served = tuple(env_ids) if env_ids else (*ENV_IDS, *(i for i in known if i not in ENV_IDS))
        for env_id in served:
            if env_id not in known:
                raise ConfigError("env", env_id, f"not an ace-gym env id{did_you_mean(env_id, known)}")
        self.env_ids = served
        self.data_dirs = tuple(Path(d).resolve() for d in data_dirs)
        for directory in self.data_dirs:
            if not directory.is_dir():
                raise ConfigError("data_dir", str(directory), "is not a directory")

    def check_env_id(self, env_id: str) -> None:
        """ProtocolError UNKNOWN_ENV unless ``env_id`` is served."""
        if env_id not in self.env_ids:
            raise ProtocolError(
                "UNKNOWN_ENV", f"this server does not serve {env_id!r}{did_you_mean(env_id, self.env_ids)}"
            )

    def make(self, env_id: str, request: MakeRequest) -> gym.Env:
        """``gym.make(env_id, **request.kwargs)`` wrapped in ``request.wrappers`` (innermost first).

        ProtocolError UNKNOWN_ENV for an id not served; FACTORY_ERROR when the env or a wrapper
        refuses its arguments, names an unknown wrapper, or a dataset outside the allowed ones.
        """
        self.check_env_id(env_id)
        if "dataset" in request.kwargs:
            self._check_dataset(request.kwargs["dataset"])
        for wrapper in request.wrappers:
            if wrapper.name not in WRAPPERS:
                raise ProtocolError(
                    "FACTORY_ERROR",
                    f"unknown wrapper {wrapper.name!r}; known: {', '.join(WRAPPERS)}{did_you_mean(wrapper.name, WRAPPERS)}",
                )
        try:
            env = gym.make(env_id, disable_env_checker=True, **request.kwargs)
            for wrapper in request.wrappers:
                env = WRAPPERS[wrapper.name](env, **wrapper.kwargs)
        except Exception as error:  # construction is a function of the client's arguments: they were refused
            raise ProtocolError(
                "FACTORY_ERROR", f"cannot make {env_id}: {type(error).__name__}: {str(error)[:500]}"
            ) from None
        return env

    def _check_dataset(self, dataset: object) -> None:
        if not isinstance(dataset, str):
            raise ProtocolError("FACTORY_ERROR", "dataset must be a bundled dataset name or a file path")
        if dataset in BUNDLED_DATASETS:
            return
        try:
            path = Path(dataset).resolve()
        except (OSError, ValueError):  # e.g. an embedded NUL
            path = None
        if path is None or not any(path.is_relative_to(directory) for directory in self.data_dirs):
            raise ProtocolError(
                "FACTORY_ERROR",
                f"dataset {dataset[:200]!r}: this server reads the bundled datasets "
                f"({', '.join(BUNDLED_DATASETS)}) and files inside its --data-dir only",
            )
