"""Rollouts and evaluation: episode specs, batched episode collection and its records, summaries,
heatmaps and the ``ace-gym eval`` / ``ace-gym report`` commands."""

from ace_gym.eval.collectors import run_env_episodes, run_vector_episodes
from ace_gym.eval.episode_spec import EpisodeSpec
from ace_gym.eval.rollout import run_episodes
from ace_gym.runs.loop import completion_action

__all__ = ["EpisodeSpec", "completion_action", "run_env_episodes", "run_episodes", "run_vector_episodes"]
