"""SkyRL (``pip install ".[skyrl]"``): ACE episodes as a ``skyrl_gym`` ``BaseTextEnv``.

:func:`write_dataset` writes the Parquet rows SkyRL's trainer reads (``prompt``, ``env_class``,
``extra_info`` naming the episode); :func:`register` makes ``env_class="ace_gym"`` build
:class:`AceTextEnv`, which plays the row's episode through the adapter stack
(``StepBudget(ChatAdapter(ToolFailureInjection(AceEnv)))``: ace-gym's parser reads whatever
format the model writes, unreadable turns get a corrective message).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import skyrl_gym
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

from ace_gym.atomic import AtomicFile
from ace_gym.errors import choice
from ace_gym.eval.episode_spec import EpisodeSpec
from ace_gym.integrations.rewards import REWARDS, partial_score
from ace_gym.parsing import FORMAT_EXAMPLES

ENV_CLASS = "ace_gym"


class AceTextEnv(BaseTextEnv):
    """One ACE episode: ``extras["extra_info"]["ace_episode"]`` is the JSON of its
    :class:`~ace_gym.eval.EpisodeSpec` (as :func:`write_dataset` stores it). ``init`` returns the
    opening messages with the tool schemas in the system message (SkyRL renders prompts without
    ``tools=``); ``step`` returns the turn's tool replies and corrective message, the turn's reward
    (the score on the last turn; with ``extra_info["ace_reward"] == "partial"`` the partial score
    of the final grid, :func:`~ace_gym.integrations.rewards.partial_score`) and ``done`` when the
    episode terminated or was truncated."""

    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        extra_info = (extras or {})["extra_info"]
        self.episode = EpisodeSpec.from_json(extra_info["ace_episode"])
        self.reward = choice("extra_info.ace_reward", extra_info.get("ace_reward") or "score", REWARDS)
        self.env = self.episode.make_env()
        self.max_turns = self.env.get_wrapper_attr("max_turns")
        self.last_info: dict[str, Any] = {}

    def init(self, prompt: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        messages, info = self.env.reset(seed=self.episode.seed, options=self.episode.reset_options())
        return with_tools(messages, info["tools"]), {}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        replies, reward, terminated, truncated, info = self.env.step(action)
        self.turns += 1
        self.last_info = info
        done = bool(terminated or truncated)
        if done and self.reward == "partial":
            core = self.env.unwrapped
            reward = partial_score(core.compiled, core.grid)
        return BaseTextEnvStepOutput(
            observations=[] if done else [dict(m) for m in replies],
            reward=float(reward),
            done=done,
            metadata={"score": info.get("score"), "parse_errors": list(info.get("parse_errors", ()))},
        )

    def get_metrics(self) -> dict[str, Any]:
        return {"score": float(self.last_info.get("score") or 0.0), "turns": self.turns}

    def close(self) -> None:
        self.env.close()


def with_tools(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with the tool schemas and the call format appended to the system message."""
    schemas = "\n".join(json.dumps(tool) for tool in tools)
    system = dict(messages[0])
    system["content"] += (
        f"\n\n# Tools\n\n<tools>\n{schemas}\n</tools>\n\nCall a tool like this:\n{FORMAT_EXAMPLES['hermes']}"
    )
    return [system, *(dict(m) for m in messages[1:])]


def register() -> None:
    """Make ``skyrl_gym.make("ace_gym", ...)`` build :class:`AceTextEnv` (once per process; call
    it where SkyRL's entry point registers its environments)."""
    if ENV_CLASS not in skyrl_gym.registry:
        skyrl_gym.register(id=ENV_CLASS, entry_point=f"{__name__}:AceTextEnv")


def write_dataset(specs: Sequence[EpisodeSpec], path: str | os.PathLike[str], *, reward: str = "score") -> None:
    """One Parquet row per spec (``data_source``, ``prompt`` with the tools, ``env_class``,
    ``extra_info``: ``ace_episode``, and ``ace_reward`` when ``reward`` is "partial"), the layout
    SkyRL's ``PromptDataset`` reads; written atomically."""
    from datasets import Dataset

    reward = choice("reward", reward, REWARDS)

    rows = []
    for spec in specs:
        extra_info = {"ace_episode": spec.to_json(), **({"ace_reward": reward} if reward != "score" else {})}
        episode = AceTextEnv(extras={"extra_info": extra_info})
        prompt = [{"role": m["role"], "content": m["content"]} for m in episode.init(None)[0]]
        episode.close()
        source = f"ace_gym/{spec.dataset}/{spec.domain}"
        rows.append({"data_source": source, "prompt": prompt, "env_class": ENV_CLASS, "extra_info": extra_info})
    with AtomicFile(path) as target:
        Dataset.from_list(rows).to_parquet(target.handle)
