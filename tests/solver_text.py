"""The exact solver as a text-writing model: for framework adapters that take the model's text
(one call a turn, :class:`SolverText`, or every independent call in one turn, :class:`BatchSolverText`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ace_gym.agents import BatchingSolver, ExactSolver
from ace_gym.chat_template import template_message
from ace_gym.envs import AceEnv
from ace_gym.eval import EpisodeSpec
from tests.steering import hermes_call

_LAST_REPLY = re.compile(r"<tool_response>\n(.*)\n</tool_response>", re.S)


class SolverText:
    """Plays ``spec``'s episode: each turn one of the solver's calls as Hermes text, fed the
    previous call's tool reply (as given, or as the last ``<tool_response>`` of a rendered prompt)."""

    def __init__(self, spec: EpisodeSpec) -> None:
        observation, info = AceEnv(spec.domain, spec.dataset).reset(seed=spec.seed, options=spec.reset_options())
        self.episode = ExactSolver().start(observation, info, seed=0)

    def next_text(self, last_reply: str = "") -> str:
        call = self.episode.act(last_reply)
        return hermes_call(call["name"], **call["arguments"])

    def next_text_after(self, rendered: str) -> str:
        replies = _LAST_REPLY.findall(rendered.rsplit("<|im_start|>assistant", 2)[-2])
        return self.next_text(replies[-1] if replies else "")


_REPLY = re.compile(r"<tool_response>\n(.*?)\n</tool_response>", re.S)


class BatchSolverText:
    """Plays ``spec``'s episode (its env keyword arguments included, e.g. FIT's compact
    observations) with the batching solver (``solver-batch``): each turn every call of that turn
    as Hermes text, one ``<tool_call>`` block per line, fed the previous turn's replies (as given,
    or as the ``<tool_response>`` blocks after the last assistant turn of a rendered prompt).
    ``calls`` holds the number of calls of each turn written."""

    def __init__(self, spec: EpisodeSpec) -> None:
        env = AceEnv(**spec.stack.env_kwargs)
        observation, info = env.reset(seed=spec.seed, options=spec.reset_options())
        self.episode = BatchingSolver().start(observation, info, seed=0)
        self.calls: list[int] = []

    def next_text(self, replies: Sequence[str] = ()) -> str:
        made = self.episode.act(list(replies) if self.episode.batched else (replies[-1] if replies else ""))
        turn = made if isinstance(made, list) else [made]
        self.calls.append(len(turn))
        return "\n".join(hermes_call(call["name"], **call["arguments"]) for call in turn)

    def next_text_after(self, rendered: str) -> str:
        return self.next_text(_REPLY.findall(rendered.rsplit("<|im_start|>assistant", 2)[-2]))


def played_conversation(spec: EpisodeSpec, texts: Sequence[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The adapter's messages (in the chat template's form) and tools after ``spec``'s episode
    is played with the assistant ``texts``, up to and including the last assistant turn."""
    env = spec.make_env()
    _, info = env.reset(seed=spec.seed, options=spec.reset_options())
    for text in texts:
        env.step(text)
    messages = [template_message(m) for m in env.get_wrapper_attr("messages")]
    last = max(k for k, m in enumerate(messages) if m["role"] == "assistant")
    return messages[: last + 1], info["tools"]


def replayed_score(spec: EpisodeSpec, texts: Sequence[str]) -> float:
    """The score of ``spec``'s episode played with the assistant ``texts`` alone: its final score,
    or the grid as it stands when the texts run out (what a trainer's ids that hold just these
    turns earned)."""
    env = spec.make_env()
    env.reset(seed=spec.seed, options=spec.reset_options())
    for text in texts:
        _, _, terminated, truncated, info = env.step(text)
        if terminated or truncated:
            return float(info["score"])
    return env.get_wrapper_attr("score")().score


def trained_texts(tokenizer: Any, ids: Sequence[int], mask: Sequence[int]) -> list[str]:
    """The assistant turns a trainer's ids hold: each run of ids with mask 1, decoded without
    special tokens (as the adapter read the turn)."""
    texts: list[str] = []
    run: list[int] = []
    for token, kept in [*zip(ids, mask, strict=True), (None, 0)]:
        if kept:
            run.append(token)
        elif run:
            texts.append(tokenizer.decode(run, skip_special_tokens=True))
            run = []
    return texts
