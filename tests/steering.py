"""A tiny random model whose sampling is steered, so trainer tests get real multi-turn tool calls.

:class:`SteeredLlama` is the tiny Llama with one more logits processor in every ``generate``
(TRL's own generation included): :class:`ScriptedTurns` leaves a finite score only on the tokens
that continue one of the texts a script allows for the current assistant turn, so the model's
own sampler picks among them (uniformly; the scores it computed are discarded). Everything else
is the trainer's real path: its generation call, its chat template and tool-call parsing, its
loss on the model's own log-probabilities.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import torch
from transformers import LlamaForCausalLM, LogitsProcessor

from ace_gym.envs import AceEnv
from ace_gym.eval import EpisodeSpec

Continuations = Callable[[str], Sequence[str]]
"""The texts allowed as the current assistant turn, given the conversation rendered so far."""


class ScriptedTurns(LogitsProcessor):
    """Allow only tokens that continue one of ``continuations(conversation)`` (each followed by
    the end-of-turn token); the turn starts after the last ``<|im_start|>assistant\\n``."""

    def __init__(self, tokenizer: Any, continuations: Continuations) -> None:
        self.tokenizer = tokenizer
        self.continuations = continuations
        self.turn_start = tokenizer.convert_tokens_to_ids("<|im_start|>")
        self.header = len(tokenizer.encode("assistant\n", add_special_tokens=False))
        self._targets: dict[tuple[int, ...], list[list[int]]] = {}  # per conversation so far: decoded once

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        steered = torch.full_like(scores, float("-inf"))
        for row, ids in enumerate(input_ids.tolist()):
            body = len(ids) - ids[::-1].index(self.turn_start) + self.header
            generated = ids[body:]
            targets = self._targets.get(tuple(ids[:body]))
            if targets is None:
                conversation = self.tokenizer.decode(ids[:body], skip_special_tokens=False)
                targets = self._targets[tuple(ids[:body])] = [
                    [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
                    for text in self.continuations(conversation)
                ]
            allowed = {
                t[len(generated)] for t in targets if t[: len(generated)] == generated and len(t) > len(generated)
            }
            steered[row, sorted(allowed or {self.tokenizer.eos_token_id})] = 0.0
        return steered


class SteeredLlama(LlamaForCausalLM):
    """The tiny Llama, with ``steering`` (a logits processor) appended to every generation's processors."""

    steering: LogitsProcessor | None = None

    def _get_logits_processor(self, *args: Any, **kwargs: Any) -> Any:
        processors = super()._get_logits_processor(*args, **kwargs)
        if self.steering is not None:
            processors.append(self.steering)
        return processors


def hermes_call(name: str, **arguments: Any) -> str:
    """A tool call as the Qwen2.5 template writes it."""
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def fill_then_done(specs: Sequence[EpisodeSpec]) -> Continuations:
    """The script for one-hidden-slot instances: turn 1 sets the slot to its truth or to a wrong
    candidate (the sampler picks, so GRPO groups get different rewards), turn 2 calls ``done``,
    any later turn answers without a tool call (which ends TRL's tool loop)."""
    answers = {}
    for spec in specs:
        env = AceEnv(spec.domain, spec.dataset)
        observation, _ = env.reset(seed=spec.seed, options=spec.reset_options())
        (slot,) = env.compiled.slots
        truth = env.compiled.item_ids[next(iter(slot.valid_items))]
        wrong = next(i for i in slot.candidate_ids if i != truth)
        answers[observation] = (slot.row, slot.col, truth, wrong)

    def continuations(conversation: str) -> list[str]:
        ((row, col, truth, wrong),) = [answer for text, answer in answers.items() if text in conversation]
        turn = conversation.count("<|im_start|>assistant") - 1  # the open header is the current turn's
        if turn == 0:
            return [hermes_call("set_slot", row=row, col=col, id=item) for item in (truth, wrong)]
        return [hermes_call("done")] if turn == 1 else ["Finished."]

    return continuations
