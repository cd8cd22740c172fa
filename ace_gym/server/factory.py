"""What a server may build for a session: served env ids, allowed wrappers, readable datasets."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym

from ace_gym.errors import ConfigError, did_you_mean
from ace_gym.instance import BUNDLED_DATASETS
from ace_gym.registration import ENV_IDS, registered_env_ids
from ace_gym.server.protocol import MakeRequest, ProtocolError
from ace_gym.stacks import StackSpec, accepted_names, wrap, wrapper_entry

WRAPPERS: dict[str, Any] = {name: wrapper_entry(name).wrapper for name in accepted_names()}
"""Wrappers a session may stack: every entry of the wrapper registry (:data:`ace_gym.stacks.WRAPPERS`),
by its registry name and by its class name (how clients before the registry named it)."""


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
        stack = self.stack(env_id, request)
        if "dataset" in stack.env_kwargs:
            self._check_dataset(stack.env_kwargs["dataset"])
        try:
            env = gym.make(env_id, disable_env_checker=True, **stack.env_kwargs)
            env = wrap(env, stack.wrappers)
        except Exception as error:  # construction is a function of the client's arguments: they were refused
            raise ProtocolError(
                "FACTORY_ERROR", f"cannot make {env_id}: {type(error).__name__}: {str(error)[:500]}"
            ) from None
        return env

    @staticmethod
    def stack(env_id: str, request: MakeRequest) -> StackSpec:
        """The stack ``request`` asks for on ``env_id`` (today's ``kwargs`` + ``wrappers`` shape or
        a :class:`~ace_gym.stacks.StackSpec`'s JSON); ProtocolError FACTORY_ERROR for one naming
        another env id, both ``kwargs`` and ``env_kwargs``, or a wrapper the registry does not hold."""
        if request.env_id is not None and request.env_id != env_id:
            raise ProtocolError(
                "FACTORY_ERROR", f"the stack's env_id {request.env_id!r} is not this session's {env_id!r}"
            )
        if request.env_kwargs is not None and request.kwargs:
            raise ProtocolError("FACTORY_ERROR", "give kwargs or env_kwargs, not both")
        kwargs = request.kwargs if request.env_kwargs is None else request.env_kwargs
        try:
            return StackSpec(env_id, kwargs, tuple((wrapper.name, wrapper.kwargs) for wrapper in request.wrappers))
        except ConfigError as error:
            raise ProtocolError("FACTORY_ERROR", str(error)[:1000]) from None

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
