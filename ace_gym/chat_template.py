"""Append-only prompt tokens for multi-turn rollouts, rendered with a Hugging Face chat template.

A rollout must not re-tokenise its whole history every turn (quadratic, and the re-tokenised
ids may differ from the ids the model actually produced). :class:`ChatTokens` renders the
conversation with ``tokenizer.apply_chat_template(messages, tools=..., add_generation_prompt=True,
tokenize=False)``, checks that the new rendering extends the previous one (the prefix
property), and tokenises only the new suffix. Templates that rewrite earlier turns (for example
one that drops the reasoning of earlier assistant turns once a new user message arrives) are
detected: a warning is logged and the whole conversation is tokenised afresh from then on.

No import of ``transformers`` happens here: any object with ``apply_chat_template``, ``encode``
and ``decode`` works (install the ``hf`` extra for real tokenizers).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Segment:
    """Token ids added in one go: ``"prompt"`` (the initial messages and generation prompt),
    ``"assistant"`` (one model turn, with the model's ``logprobs`` when known) or ``"env"`` (the
    replies and the next generation prompt)."""

    kind: str
    token_ids: list[int]
    logprobs: list[float] | None = None


def template_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI message as chat templates expect it: ``tool_calls[*].function.arguments`` as a
    dict rather than a JSON string (left as is when it does not decode to an object, and so is a
    ``tool_calls`` that is no list of calls: a model's malformed output)."""
    tool_calls = message.get("tool_calls")
    if not tool_calls or not isinstance(tool_calls, list):
        return dict(message)
    converted = []
    for call in tool_calls:
        function = call.get("function") if isinstance(call, Mapping) else None
        arguments = function.get("arguments") if isinstance(function, Mapping) else None
        if isinstance(function, Mapping) and isinstance(arguments, str):
            try:
                decoded = json.loads(arguments)
            except ValueError:
                decoded = arguments
            if isinstance(decoded, dict):
                call = {**call, "function": {**function, "arguments": decoded}}
        converted.append(call)
    return {**message, "tool_calls": converted}


class ChatTokens:
    """The token ids of one chat rollout, grown turn by turn.

    ``reset(messages)`` tokenises the initial prompt (with the generation prompt). Each
    ``add_turn(assistant, replies, generated_ids=None)`` appends the assistant turn (the model's
    own ``generated_ids`` when given, kept verbatim, else the template's rendering of
    ``assistant``) and the env's ``replies`` plus the next generation prompt, tokenising only
    that new text. ``sync(messages)`` does the same from a whole conversation, e.g. a
    :class:`~ace_gym.wrappers.ChatAdapter` ``info["messages"]``. ``token_ids`` is always the
    prompt for the next generation; ``segments`` holds the per-turn ids and
    ``assistant_mask()`` marks the model's tokens (for a training loss) and ``trajectory()``
    gives the whole rollout in the prompt/response layout trainers take.

    When ``generated_ids`` are given, the template's closing text after the end-of-turn token
    (say the ``"\\n"`` after ``<|im_end|>``) is added to the env segment, so the ids are what the
    model saw; ``verify()`` then only holds if the template renders the turn as generated.
    """

    def __init__(
        self, tokenizer: Any, tools: Sequence[Mapping[str, Any]] | None = None, **template_kwargs: Any
    ) -> None:
        self.tokenizer = tokenizer
        self.tools = list(tools) if tools is not None else None
        self.template_kwargs = template_kwargs
        self.prefix_stable = True
        self.segments: list[Segment] = []
        self._messages: list[dict[str, Any]] = []
        self._rendered = ""
        self._token_ids: list[int] = []

    @property
    def token_ids(self) -> list[int]:
        """The prompt ids for the next generation (a copy)."""
        return list(self._token_ids)

    @property
    def message_count(self) -> int:
        """How many messages have been tokenised (a rollout compares it with its conversation)."""
        return len(self._messages)

    def reset(self, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """Start a rollout from its initial messages; returns the prompt ids."""
        self._messages = [template_message(m) for m in messages]
        self._rendered = self._render(self._messages, generation_prompt=True)
        ids = self._encode(self._rendered)
        self.segments = [Segment("prompt", ids)]
        self._token_ids = list(ids)
        self.prefix_stable = True
        return list(ids)

    def add_turn(
        self,
        assistant: Mapping[str, Any],
        replies: Sequence[Mapping[str, Any]],
        generated_ids: Sequence[int] | None = None,
        logprobs: Sequence[float] | None = None,
    ) -> list[int]:
        """Append one assistant turn and the env's replies; returns the ids appended after the
        assistant's (the env text and the next generation prompt). ``logprobs`` are the model's
        log-probabilities of ``generated_ids`` (one each; ValueError otherwise)."""
        if logprobs is not None and (generated_ids is None or len(logprobs) != len(generated_ids)):
            raise ValueError("logprobs need the generated ids, one log-probability per id")
        with_assistant = [*self._messages, template_message(assistant)]
        messages = with_assistant + [template_message(m) for m in replies]
        assistant_render = self._render(with_assistant, generation_prompt=False)
        full_render = self._render(messages, generation_prompt=True)
        previous = self._rendered
        self._messages, self._rendered = messages, full_render
        if not (assistant_render.startswith(previous) and full_render.startswith(assistant_render)):
            return self._retokenise(full_render)
        assistant_text = assistant_render[len(previous) :]
        env_text = full_render[len(assistant_render) :]
        if generated_ids is None:
            assistant_ids = self._encode(assistant_text)
        else:
            assistant_ids = list(generated_ids)
            env_text = self._closing_text(assistant_text, assistant_ids) + env_text
        env_ids = self._encode(env_text)
        turn_logprobs = None if logprobs is None else [float(x) for x in logprobs]
        self.segments += [Segment("assistant", assistant_ids, turn_logprobs), Segment("env", env_ids)]
        self._token_ids += assistant_ids
        self._token_ids += env_ids
        return env_ids

    def sync(
        self,
        messages: Sequence[Mapping[str, Any]],
        generated_ids: Sequence[int] | None = None,
        logprobs: Sequence[float] | None = None,
    ) -> list[int]:
        """Catch up with a conversation that grew by one assistant turn and its replies (the
        messages already seen are assumed unchanged); returns the appended env ids."""
        new = messages[len(self._messages) :]
        if not new or new[0].get("role") != "assistant":
            raise ValueError("sync expects the conversation to have grown by an assistant message and its replies")
        return self.add_turn(new[0], new[1:], generated_ids, logprobs)

    def assistant_mask(self) -> list[int]:
        """1 for every token the model generated, 0 for prompt and env tokens."""
        return [int(s.kind == "assistant") for s in self.segments for _ in s.token_ids]

    def trajectory(self, *, through_last_turn: bool = False) -> dict[str, Any] | None:
        """The rollout as trainers take it: ``prompt_ids`` (the opening prompt), ``response_ids``
        (every later id: the model's own and the env's), ``assistant_mask`` (1 = the model's),
        ``logprobs`` (the model's per id, 0.0 on env ids; None unless every turn had them) and
        ``turn_starts`` (where each assistant turn begins in ``response_ids``).

        ``through_last_turn`` stops after the last assistant turn (the final replies and the
        generation prompt after them train nothing). None once the template proved not
        prefix-stable: the ids of earlier turns were then re-tokenised, not kept.
        """
        if not self.prefix_stable:
            return None
        segments = self.segments[1:]
        if through_last_turn:
            last = max((k for k, s in enumerate(segments) if s.kind == "assistant"), default=-1)
            segments = segments[: last + 1]
        response: list[int] = []
        mask: list[int] = []
        logprobs: list[float] | None = []
        starts: list[int] = []
        for segment in segments:
            assistant = segment.kind == "assistant"
            if assistant:
                starts.append(len(response))
            response += segment.token_ids
            mask += [int(assistant)] * len(segment.token_ids)
            if logprobs is not None:  # None from the first assistant turn without logprobs on
                if not assistant:
                    logprobs += [0.0] * len(segment.token_ids)
                elif segment.logprobs is None:
                    logprobs = None
                else:
                    logprobs += segment.logprobs
        prompt = self.segments[0].token_ids if self.segments else []
        return {
            "prompt_ids": list(prompt),
            "response_ids": response,
            "assistant_mask": mask,
            "logprobs": logprobs,
            "turn_starts": starts,
        }

    def verify(self) -> bool:
        """Whether ``token_ids`` equals a fresh tokenisation of the whole rendered conversation."""
        return self._token_ids == self._encode(self._rendered)

    def _retokenise(self, rendered: str) -> list[int]:
        if self.prefix_stable:
            logger.warning(
                "chat template is not prefix-stable (a new turn changed the rendering of earlier turns); "
                "tokenising the whole conversation each turn from now on"
            )
            self.prefix_stable = False
        ids = self._encode(rendered)
        self.segments = [Segment("prompt", ids)]
        self._token_ids = list(ids)
        return list(ids)

    def _closing_text(self, assistant_text: str, generated_ids: list[int]) -> str:
        """The template text that follows the model's own tokens: after its end-of-turn token."""
        generated = self.tokenizer.decode(generated_ids, skip_special_tokens=False)
        if assistant_text.startswith(generated):
            return assistant_text[len(generated) :]
        end_of_turn = getattr(self.tokenizer, "eos_token", None)
        if not end_of_turn or end_of_turn not in assistant_text:
            return ""
        at = assistant_text.rfind(end_of_turn)
        return assistant_text[at + len(end_of_turn) :] if generated.endswith(end_of_turn) else assistant_text[at:]

    def _render(self, messages: list[dict[str, Any]], *, generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            messages,
            tools=self.tools,
            add_generation_prompt=generation_prompt,
            tokenize=False,
            **self.template_kwargs,
        )

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False)) if text else []
