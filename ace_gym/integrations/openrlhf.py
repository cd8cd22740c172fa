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

Limits (:class:`AgentExecutor`): ``--data.max_len`` holds the prompt and the whole episode, and
an episode whose ids reach it ends there, scored as its grid stands (``extra_logs["truncated"]``);
``--rollout.max_new_tokens``, when set, caps each turn (OpenRLHF's executor would give every
turn all the room left).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Sequence
from copy import copy, deepcopy
from typing import Any

import torch
from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor

from ace_gym.atomic import AtomicFile
from ace_gym.chat_template import ChatTokens
from ace_gym.errors import ConfigError, optional_integer
from ace_gym.eval.episode_spec import EpisodeSpec
from ace_gym.text import valid_text


class GeneratedTurn:
    """The ids of an episode's last generation, as its engine returned them (:class:`AgentExecutor`
    records them for its :class:`AgentInstance`). A plain class: OpenRLHF executes this file
    without registering it as a module, which a dataclass needs."""

    def __init__(self) -> None:
        self.token_ids: list[int] | None = None


class AgentInstance(AgentInstanceBase):
    """One ACE episode: ``label`` is the JSON of its :class:`~ace_gym.eval.EpisodeSpec`. ``reset``
    returns the opening rendered by ``tokenizer``'s chat template (with the tools); ``step``
    returns the turn's reward (the score on the last turn), the rendered replies and the next
    generation prompt as ``environment_feedback`` (nothing once ``done``) and ``extra_logs``.

    With ``max_length`` (the executor's, the prompt and the whole episode), an episode whose ids
    reach it is done after that turn, its reward the score of the grid as it stands
    (``extra_logs["truncated"]`` 1): OpenRLHF would end it there with no more turns, so the
    reward is earned by the ids it trains on; an opening that leaves less than ``first_turn`` ids
    of it (OpenRLHF's room for the first turn: the per-turn cap, else 1) is a ConfigError naming
    ``data.max_len``, where OpenRLHF would cut the opening's first ids off. With ``generated``
    (filled by :class:`AgentExecutor` on each generation), the turn's ids are the engine's own (a
    turn cut by a length limit has no end-of-turn token), else the action text re-encoded and
    the end id.
    """

    def __init__(
        self,
        tokenizer: Any,
        max_length: int | None = None,
        generated: GeneratedTurn | None = None,
        first_turn: int = 1,
    ) -> None:
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.generated = generated
        self.first_turn = first_turn

    async def reset(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        self.spec = EpisodeSpec.from_json(states["label"])
        self.env = self.spec.make_env()
        messages, info = self.env.reset(seed=self.spec.seed, options=self.spec.reset_options())
        self.tokens = ChatTokens(self.tokenizer, info["tools"])
        opening = self.tokens.reset(messages)
        if self.max_length is not None and len(opening) + self.first_turn > self.max_length:
            self.env.close()
            raise ConfigError(
                "data.max_len",
                self.max_length,
                f"leaves no room for the opening of {self.spec.key('openrlhf')} ({len(opening)} ids) and a first "
                f"turn of {self.first_turn}: OpenRLHF would cut the opening; raise it",
            )
        return {"observation": self._text(opening)}

    async def step(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        action = states["action_text"]
        _, reward, terminated, truncated, info = self.env.step(action)
        done = bool(terminated or truncated)
        if self.generated is not None and self.generated.token_ids is not None:
            generated = list(self.generated.token_ids)
        else:  # OpenRLHF's text leaves out the end-of-turn token the model stopped on
            text = valid_text(action)  # a lone surrogate does not encode
            generated = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        feedback = self.tokens.sync(info["messages"], generated)
        score = float(info.get("score") or 0.0)
        cut = not done and self.max_length is not None and len(self.tokens.token_ids) >= self.max_length
        if cut:  # no room for another turn: the episode ends here, scored as its grid stands
            reward = score = float(self.env.get_wrapper_attr("score")().score)
            done = True
        if done:
            self.env.close()
        return {
            "rewards": torch.tensor(float(reward)),
            "scores": torch.tensor(score),
            "environment_feedback": "" if done else self._text(feedback),
            "done": done,
            "extra_logs": {
                "score": torch.tensor(score),
                "parse_errors": torch.tensor(len(info["parse_errors"])),
                "truncated": torch.tensor(float(cut or truncated)),
            },
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
    """OpenRLHF's multi-turn executor over :class:`AgentInstance` (given the run's tokenizer and
    ``max_length``), its engine giving each turn at most the ``max_tokens`` OpenRLHF's sampling
    params arrive with (``--rollout.max_new_tokens``; None: all the room left) and telling the
    instance the ids it generated."""

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
        # OpenRLHF hands a prompt's samples one sampling-params object and its executor writes each
        # turn's room on it: this episode's own copy keeps --rollout.max_new_tokens for the others
        sampling_params = deepcopy(sampling_params)
        generated = GeneratedTurn()
        engine = TurnCappedEngine(llm_engine, sampling_params.max_tokens, generated)
        # this episode's own executor: OpenRLHF's shared one plays a prompt's samples at once
        episode = copy(self)
        episode.agent_instance_cls = functools.partial(  # type: ignore[assignment]
            AgentInstance, hf_tokenizer, max_length=max_length, generated=generated, first_turn=engine.turn_cap or 1
        )
        return await MultiTurnAgentExecutor.execute(
            episode, prompt, label, sampling_params, max_length, hf_tokenizer, engine, images
        )


class TurnCappedEngine:
    """``engine`` for one episode: each generation gets at most ``turn_cap`` new tokens (None: as
    asked), and its ids are recorded in ``generated``."""

    def __init__(self, engine: Any, turn_cap: int | None, generated: GeneratedTurn) -> None:
        self.engine = engine
        self.turn_cap = optional_integer("rollout.max_new_tokens", turn_cap, minimum=1)
        self.generated = generated

    async def generate(self, token_ids: list[int], sampling_params: Any, **kwargs: Any) -> Any:
        if self.turn_cap is not None:
            sampling_params.max_tokens = min(sampling_params.max_tokens, self.turn_cap)
        output = await self.engine.generate(token_ids, sampling_params, **kwargs)
        self.generated.token_ids = list(output.outputs[0].token_ids)
        return output


def write_dataset(specs: Sequence[EpisodeSpec], path: str | os.PathLike[str]) -> None:
    """A JSONL file for OpenRLHF, one row per spec: ``prompt`` (the opening messages, which
    ``reset`` renders again itself) and ``label`` (the spec as JSON); written atomically."""
    with AtomicFile(path, text=True) as target:
        for spec in specs:
            target.handle.write(json.dumps({"prompt": spec.opening(), "label": spec.to_json()}) + "\n")
