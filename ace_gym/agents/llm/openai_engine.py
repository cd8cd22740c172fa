"""Chat engine for any OpenAI-compatible server (``vllm serve``, SGLang, hosted APIs)."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import threading
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from ace_gym.agents.base import Completion
from ace_gym.agents.llm.messages import for_openai
from ace_gym.errors import ConfigError, EngineUnavailableError, integer, one_line

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

UNAVAILABLE_STATUS = {
    401: "authentication refused (API key)",
    403: "permission denied",
    404: "not found (model name, or base URL: requests go to <base URL>/chat/completions, so it usually ends in /v1)",
    429: "rate limited or out of quota",
    502: "bad gateway",
    503: "service unavailable",
    504: "gateway timeout",
}
"""HTTP statuses that say the endpoint cannot serve the model at all, whatever the request:
:class:`~ace_gym.errors.EngineUnavailableError`, never an episode outcome."""


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
    a server's ``Retry-After``; about 14 s in all for the default 5 retries); ``timeout_s`` bounds
    each attempt. What a request that still fails becomes follows one rule:

    * An endpoint that cannot serve the model raises :class:`~ace_gym.errors.EngineUnavailableError`
      (one line naming :attr:`base_url`, the model and the cause), never a completion: a connection
      refused or a host that does not resolve once retries run out, a wrong key (401), a refusal
      (403), a wrong URL or model name (404), and 429/502/503/504 once retries run out
      (:data:`UNAVAILABLE_STATUS`).
    * Until the engine has had one successful completion, any failed request raises it too: an
      endpoint that answers its first requests with a 400 or a 500 (``vllm serve`` started without
      ``--enable-auto-tool-choice`` answers 400 to every request that carries ``tools``) or that
      gives no answer within ``timeout_s`` is taken as unable to serve the model; the error names
      the status and the server's message, or the ``timeout_s`` that ran out.
    * A request the server refuses as over the model's context (a 4xx whose error code is
      ``context_length_exceeded`` or whose message speaks of the context length, as OpenAI, vLLM
      and SGLang word it) raises :class:`~ace_gym.errors.ConfigError` naming ``sampling.max_tokens``
      and quoting the server: an episode the model cannot be given its turn in is a configuration
      to fix, never an error turn that scores 0.
    * Once one request has succeeded, a server that answers about one request (any other 4xx; a
      500 once retries run out) or one that times out gives
      that conversation ``Completion(text=<the error>, finish_reason="error")``, and the others
      are unaffected: one bad sample does not stop a run.

    The completion holds the message ``content`` as ``text``, native ``tool_calls`` (OpenAI shape),
    the server-separated reasoning (``reasoning_content`` or ``reasoning``), the ``usage``
    token counts the server reports, and ``logprobs`` when asked for (``sampling={"logprobs":
    True}``: one per generated token, ``choices[0].logprobs.content[*].logprob``). Token ids are
    not part of the protocol: they stay None unless the server adds them (``vllm serve`` does with
    ``extra_body={"return_token_ids": True}``: ``prompt_token_ids`` and the choice's ``token_ids``).

    ``vllm serve`` answers requests that carry ``tools`` only when started with
    ``--enable-auto-tool-choice --tool-call-parser NAME`` (else every request is a 400, and the
    first one raises :class:`~ace_gym.errors.EngineUnavailableError`).
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
        self.timeout_s = timeout_s
        self._served = False  # set by the first successful completion: see the class docstring's rule
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

        tasks = [asyncio.ensure_future(bounded(c, t)) for c, t in zip(conversations, tools, strict=True)]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:  # an unavailable endpoint: the other requests would only retry in vain
            for task in tasks:
                task.cancel()
            raise

    async def _complete(self, conversation: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion:
        import openai

        request: dict[str, Any] = {"model": self.model, "messages": for_openai(conversation), **self.sampling}
        if tools:
            request["tools"] = tools
        try:
            response = await self._client.chat.completions.create(**request)
        except openai.APITimeoutError as error:  # an APIConnectionError too: a healthy server may be slow
            problem = f"no answer within timeout_s={self.timeout_s}{self._after_retries()}"
            if not self._served:
                raise self._unavailable(f"{problem}, before any request succeeded") from error
            return self._error_completion(error, problem)
        except openai.APIConnectionError as error:  # refused, unresolved: after the client's retries
            raise self._unavailable(f"cannot connect ({_root_cause(error)}){self._after_retries()}") from error
        except openai.APIStatusError as error:
            status = error.status_code
            if _over_the_context(error):
                raise ConfigError(
                    "sampling.max_tokens",
                    self.sampling.get("max_tokens"),
                    f"the server refused a request over the model's context (model {self.model!r} at "
                    f"{self.base_url}): {one_line(error.message)}; lower max_tokens or keep the episodes "
                    "shorter (max_turns, a context policy: docs/training.md)",
                ) from error
            if status in UNAVAILABLE_STATUS:
                problem = f"HTTP {status} {UNAVAILABLE_STATUS[status]}: {error.message}"
                raise self._unavailable(problem + self._after_retries(status)) from error
            if not self._served:
                problem = f"HTTP {status}{self._after_retries(status)} before any request succeeded: {error.message}"
                raise self._unavailable(problem) from error
            return self._error_completion(error, str(error))
        self._served = True
        return _completion_of(response)

    @staticmethod
    def _error_completion(error: Exception, problem: str) -> Completion:
        """The completion of one request that failed after any retries, once the endpoint has served one."""
        logger.warning("chat completion failed: %s", one_line(problem))
        return Completion(text=f"{type(error).__name__}: {problem}", finish_reason="error")

    def _unavailable(self, problem: str) -> EngineUnavailableError:
        return EngineUnavailableError(f"model endpoint {self.base_url} (model {self.model!r})", problem)

    def _after_retries(self, status: int | None = None) -> str:
        """`` after N retries`` for a failure the client retries (no answer, HTTP 408/409/429/5xx); else ""."""
        retried = status is None or status in (408, 409, 429) or status >= 500
        return f" after {self._client.max_retries} retries" if retried and self._client.max_retries else ""

    @property
    def base_url(self) -> str:
        """The base URL requests go to: the one given, else ``OPENAI_BASE_URL``, else the OpenAI API."""
        return str(self._client.base_url)

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
    token_logprobs = choice.logprobs.content if choice.logprobs is not None else None
    prompt_ids = (response.model_extra or {}).get("prompt_token_ids")
    completion_ids = (choice.model_extra or {}).get("token_ids")
    return Completion(
        text=message.content or "",
        tool_calls=[call.model_dump(exclude_none=True) for call in message.tool_calls] if message.tool_calls else None,
        reasoning=reasoning,
        prompt_tokens=usage.prompt_tokens if usage else 0,
        completion_tokens=usage.completion_tokens if usage else 0,
        prompt_token_ids=list(prompt_ids) if prompt_ids is not None else None,
        completion_token_ids=list(completion_ids) if completion_ids is not None else None,
        finish_reason=choice.finish_reason,
        logprobs=[float(item.logprob) for item in token_logprobs] if token_logprobs is not None else None,
    )


_OVER_THE_CONTEXT = re.compile(r"context[ _]length", re.IGNORECASE)


def _over_the_context(error: Any) -> bool:
    """Whether an HTTP error refuses a request for being over the model's context: OpenAI's code
    ``context_length_exceeded``; vLLM's "maximum context length is N tokens", SGLang's alike."""
    if error.status_code >= 500 or error.status_code in UNAVAILABLE_STATUS:
        return False
    return error.code == "context_length_exceeded" or bool(_OVER_THE_CONTEXT.search(str(error.message)))


def _root_cause(error: BaseException) -> str:
    """The innermost exception under ``error`` (the socket's "Connection refused", the resolver's
    "Name or service not known"), as ``Type: message``; ``error`` itself when it wraps nothing."""
    root, seen = error, {id(error)}
    while (inner := root.__cause__ or root.__context__) is not None and id(inner) not in seen:
        root = inner
        seen.add(id(root))
    return f"{type(root).__name__}: {root}"
