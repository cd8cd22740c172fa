"""OpenRLHF (``pip install ".[openrlhf]"``): this module is an ``agent_func`` file.

Train with ``--train.agent_func_path $(python -c "import ace_gym.integrations.openrlhf as m;
print(m.__file__)")`` on rows from :func:`write_dataset` (``--data.label_key label``). OpenRLHF's
``MultiTurnAgentExecutor`` calls the async ``reset``/``step`` of :class:`AgentInstance` per episode
and keeps the token ids itself; the instance plays the episode through the adapter stack and
renders each turn's replies with the chat template, continuing exactly after the model's
end-of-turn token (:class:`~ace_gym.chat_template.ChatTokens`), so the ids stay append-only.

OpenRLHF's executor takes the opening and each turn's replies as text and encodes them itself
(it has no way to take ids), so the token-exact guarantee reaches its training ids only through
a decode -> encode round trip: every text handed over is checked to encode back to ace-gym's ids
(true for byte-level BPE tokenizers such as Qwen's), and a tokenizer for which it does not is a
ConfigError instead of silently different training ids.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Sequence
from typing import Any

import torch
from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor

from ace_gym.atomic import AtomicFile
from ace_gym.chat_template import ChatTokens
from ace_gym.errors import ConfigError
from ace_gym.eval.episode_spec import EpisodeSpec


class AgentInstance(AgentInstanceBase):
    """One ACE episode: ``label`` is the JSON of its :class:`~ace_gym.eval.EpisodeSpec`. ``reset``
    returns the opening rendered by ``tokenizer``'s chat template (with the tools); ``step``
    returns the turn's reward (the score on the last turn), the rendered replies and the next
    generation prompt as ``environment_feedback`` (nothing once ``done``) and ``extra_logs``."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    async def reset(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        self.spec = EpisodeSpec.from_json(states["label"])
        self.env = self.spec.make_env()
        messages, info = self.env.reset(seed=self.spec.seed, options=self.spec.reset_options())
        self.tokens = ChatTokens(self.tokenizer, info["tools"])
        return {"observation": self._text(self.tokens.reset(messages))}

    async def step(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        action = states["action_text"]
        _, reward, terminated, truncated, info = self.env.step(action)
        done = bool(terminated or truncated)
        # OpenRLHF's text leaves out the end-of-turn token the model stopped on (a turn cut by the
        # length limit is always the last one): the replies continue after it
        generated = [*self.tokenizer.encode(action, add_special_tokens=False), self.tokenizer.eos_token_id]
        feedback = self.tokens.sync(info["messages"], generated)
        score = float(info.get("score") or 0.0)
        if done:
            self.env.close()
        return {
            "rewards": torch.tensor(float(reward)),
            "scores": torch.tensor(score),
            "environment_feedback": "" if done else self._text(feedback),
            "done": done,
            "extra_logs": {"score": torch.tensor(score), "parse_errors": torch.tensor(len(info["parse_errors"]))},
        }

    def _text(self, ids: list[int]) -> str:
        """``ids`` as the text OpenRLHF encodes back (as its executor does); ConfigError naming
        the tokenizer when that text does not encode to ``ids``."""
        text = self.tokenizer.decode(ids, clean_up_tokenization_spaces=False)
        if self.tokenizer(text=text, add_special_tokens=False)["input_ids"] != list(ids):
            raise ConfigError(
                "tokenizer",
                getattr(self.tokenizer, "name_or_path", type(self.tokenizer).__name__),
                "decoding and re-encoding the env's text changes its ids: OpenRLHF would train on other ids",
            )
        return text


class AgentExecutor(MultiTurnAgentExecutor):
    """OpenRLHF's multi-turn executor over :class:`AgentInstance` (given the run's tokenizer)."""

    def __init__(self) -> None:
        super().__init__(AgentInstance)

    async def execute(
        self,
        prompt: Any,
        label: Any,
        sampling_params: Any,
        max_length: int,
        hf_tokenizer: Any,
        llm_engine: Any,
        images: Any = None,
    ) -> dict[str, Any]:
        self.agent_instance_cls = functools.partial(AgentInstance, hf_tokenizer)  # type: ignore[assignment]
        return await super().execute(prompt, label, sampling_params, max_length, hf_tokenizer, llm_engine, images)


def write_dataset(specs: Sequence[EpisodeSpec], path: str | os.PathLike[str]) -> None:
    """A JSONL file for OpenRLHF, one row per spec: ``prompt`` (the opening messages, which
    ``reset`` renders again itself) and ``label`` (the spec as JSON); written atomically."""
    with AtomicFile(path, text=True) as target:
        for spec in specs:
            target.handle.write(json.dumps({"prompt": spec.opening(), "label": spec.to_json()}) + "\n")
