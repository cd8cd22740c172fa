"""Rollouts and evaluation: the rollout loop, batched episode collection, crash-safe result files,
summaries, heatmaps and the ``ace-gym eval`` / ``ace-gym report`` commands."""

from ace_gym.eval.rollout import EpisodeSpec, run_env_episodes, run_episodes, run_vector_episodes
from ace_gym.runs.loop import completion_action

__all__ = ["EpisodeSpec", "completion_action", "run_env_episodes", "run_episodes", "run_vector_episodes"]
