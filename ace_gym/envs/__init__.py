"""Gymnasium environments."""

from ace_gym.envs.ace_env import AceEnv

__all__ = ["AceEnv"]
