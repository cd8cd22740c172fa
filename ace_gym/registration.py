"""The one place env ids are minted: ``ACE-<domain>-v0`` for every domain."""

from __future__ import annotations

from gymnasium.envs.registration import register, registry

from ace_gym.domains import DOMAIN_NAMES

ENV_IDS: tuple[str, ...] = tuple(f"ACE-{domain}-v0" for domain in DOMAIN_NAMES)


def register_envs() -> None:
    """Register every ace-gym env id (idempotent)."""
    for domain, env_id in zip(DOMAIN_NAMES, ENV_IDS, strict=True):
        if env_id not in registry:
            register(id=env_id, entry_point="ace_gym.envs.ace_env:AceEnv", kwargs={"domain": domain})
