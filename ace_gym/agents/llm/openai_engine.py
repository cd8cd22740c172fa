"""Chat engine for any OpenAI-compatible server (``vllm serve``, SGLang, hosted APIs)."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from ace_gym.agents.base import Completion
from ace_gym.agents.llm.messages import for_openai
from ace_gym.errors import ConfigError, integer

logger = logging.getLogger(__name__)
_T = TypeVar("_T")


class OpenAIChatEngine:
    """A :class:`~ace_gym.agents.base.ChatEngine` that sends chat-completions requests with the
    official ``openai`` client.

    Each ``generate`` call sends one request per conversation (with its ``tools``), at most
    ``max_concurrency`` in flight (an ``asyncio.Semaphore``), on an event loop the engine owns in
    a background thread, so ``generate`` works from plain scripts and from code that already runs
    an event loop (notebooks). ``sampling`` (``temperature``, ``max_tokens``, ``top_p``, ``seed``,
    ``extra_body``...) is passed to ``chat.completions.create`` unchanged.

    Errors: connection errors, timeouts, HTTP 408/409/429 and 5xx are retried by the ``openai``
    client itself, up to ``max_retries`` times, with its exponential backoff and jitter (honouring
    a server's ``Retry-After``); ``timeout_s`` bounds each attempt. When retries run out, or the
    server rejects one request (any other 4xx, e.g. a prompt longer than the context), that
    conversation gets ``Completion(text=<the error>, finish_reason="error")`` and the others are
    unaffected. Authentication, permission and not-found errors (a wrong key, URL or model name)
    raise :class:`~ace_gym.errors.ConfigError`.

    The completion holds the message ``content`` as ``text``, native ``tool_calls`` (OpenAI shape),
    the server-separated reasoning (``reasoning_content`` or ``reasoning``) and the ``usage``
    token counts the server reports; token ids are not part of the protocol and stay None.

    ``vllm serve`` answers requests that carry ``tools`` only when started with
    ``--enable-auto-tool-choice --tool-call-parser NAME`` (else every request is a 400 and every
    turn an error completion).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        sampling: Mapping[str, Any] | None = None,
        max_concurrency: int = 32,
        max_retries: int = 5,
        timeout_s: float = 600.0,
    ) -> None:
        from openai import AsyncOpenAI

        max_concurrency = integer("max_concurrency", max_concurrency, minimum=1)
        max_retries = integer("max_retries", max_retries, minimum=0)
        self.model = model
        self.sampling = dict(sampling or {})
        self.max_concurrency = max_concurrency
        self._client = AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY",
            max_retries=max_retries,
            timeout=timeout_s,
        )
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="ace-gym-openai", daemon=True)
        self._thread.start()

    def generate(
        self, conversations: Sequence[list[dict[str, Any]]], tools: Sequence[list[dict[str, Any]]]
    ) -> list[Completion]:
        """One completion per conversation, in order (see the class docstring for the contract)."""
        if len(conversations) != len(tools):
            raise ValueError(f"{len(conversations)} conversations but {len(tools)} tool lists")
        return self._run(self.agenerate(conversations, tools))

    async def agenerate(
        self, conversations: Sequence[list[dict[str, Any]]], tools: Sequence[list[dict[str, Any]]]
    ) -> list[Completion]:
        """Async twin of :meth:`generate`, to be awaited on the engine's own loop (``generate`` does that)."""
        semaphore = asyncio.Semaphore(self.max_concurrency)

        async def bounded(conversation: list[dict[str, Any]], conversation_tools: list[dict[str, Any]]) -> Completion:
            async with semaphore:
                return await self._complete(conversation, conversation_tools)

        return list(await asyncio.gather(*(bounded(c, t) for c, t in zip(conversations, tools, strict=True))))

    async def _complete(self, conversation: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion:
        import openai

        request: dict[str, Any] = {"model": self.model, "messages": for_openai(conversation), **self.sampling}
        if tools:
            request["tools"] = tools
        try:
            response = await self._client.chat.completions.create(**request)
        except (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError) as error:
            raise ConfigError("model", f"{self.model}@{self._client.base_url}", str(error)) from error
        except (openai.APIConnectionError, openai.APIStatusError) as error:  # after the client's retries
            logger.warning("chat completion failed: %s", error)
            return Completion(text=f"{type(error).__name__}: {error}", finish_reason="error")
        return _completion_of(response)

    def _run(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def close(self) -> None:
        """Close the HTTP client and stop the engine's event loop."""
        if self._loop.is_closed():
            return
        self._run(self._client.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def __enter__(self) -> OpenAIChatEngine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _completion_of(response: Any) -> Completion:
    """A Completion from a ``ChatCompletion`` response (first choice)."""
    choice = response.choices[0]
    message = choice.message
    extra = message.model_extra or {}
    reasoning = extra.get("reasoning_content") or extra.get("reasoning")
    usage = response.usage
    return Completion(
        text=message.content or "",
        tool_calls=[call.model_dump(exclude_none=True) for call in message.tool_calls] if message.tool_calls else None,
        reasoning=reasoning,
        prompt_tokens=usage.prompt_tokens if usage else 0,
        completion_tokens=usage.completion_tokens if usage else 0,
        finish_reason=choice.finish_reason,
    )
