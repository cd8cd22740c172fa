"""Chat engine for any OpenAI-compatible server (``vllm serve``, SGLang, hosted APIs)."""

from __future__ import annotations

import asyncio
import json
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
    * An answer that is no chat completion raises it too, whenever it comes: a redirect (3xx: the
      base URL is not the API's), or a 200 whose body is not JSON (an HTML page, truncated, not
      UTF-8) or lacks what a completion holds (``choices[0].message`` an object, ``content`` a
      string or null, ``usage`` an object of integer counts or null, ``logprobs`` and token ids
      of numbers). What the *model* wrote is never checked here: ``tool_calls`` of any shape
      reach the adapter, which answers a malformed one with an error observation.
    * Once one request has succeeded, a request that fails alone is a transient error: a timeout
      or a 5xx once the client's retries run out is sent again, and any other 4xx (a refusal of
      that one conversation) gives it ``Completion(text=<the error>, finish_reason="error")``,
      the others unaffected. But ``max_consecutive_failures`` failed requests in a row (no
      success between them, default 3) raise :class:`~ace_gym.errors.EngineUnavailableError`:
      an endpoint that fails everything stops the run (exit 7), and the episodes in flight
      store nothing.

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
        max_consecutive_failures: int = 3,
    ) -> None:
        from openai import AsyncOpenAI

        max_concurrency = integer("max_concurrency", max_concurrency, minimum=1)
        max_retries = integer("max_retries", max_retries, minimum=0)
        self.max_consecutive_failures = integer("max_consecutive_failures", max_consecutive_failures, minimum=1)
        self._failures_in_a_row = 0  # failed requests since the last success
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
        request: dict[str, Any] = {"model": self.model, "messages": for_openai(conversation), **self.sampling}
        if tools:
            request["tools"] = tools
        while True:
            completion = await self._attempt(request)
            if completion is not None:
                return completion

    async def _attempt(self, request: dict[str, Any]) -> Completion | None:
        """One request (with the client's retries): its completion, an error completion, or None
        for a transient failure to send again; raises when the endpoint cannot serve (class docstring)."""
        import openai

        try:
            raw = await self._client.chat.completions.with_raw_response.create(**request)
        except openai.APITimeoutError as error:  # an APIConnectionError too: a healthy server may be slow
            problem = f"no answer within timeout_s={self.timeout_s}{self._after_retries()}"
            if not self._served:
                raise self._unavailable(f"{problem}, before any request succeeded") from error
            return self._failed(error, problem, transient=True)
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
            if status < 400:
                raise self._unavailable(f"HTTP {status}: redirected, the base URL is not the API's") from error
            if not self._served:
                problem = f"HTTP {status}{self._after_retries(status)} before any request succeeded: {error.message}"
                raise self._unavailable(problem) from error
            problem = f"HTTP {status}{self._after_retries(status)}: {error.message}"
            return self._failed(error, problem, transient=status >= 500)
        if raw.status_code != 200:
            raise self._unavailable(f"HTTP {raw.status_code}: not a chat completion's status")
        try:
            completion = completion_of_body(raw.http_response.content)
        except MalformedResponseError as error:
            raise self._unavailable(f"HTTP 200 with a body that is no chat completion: {error}") from None
        self._served = True
        self._failures_in_a_row = 0
        return completion

    def _failed(self, error: Exception, problem: str, *, transient: bool) -> Completion | None:
        """After a success, a request that failed: None to send a transient one again, else its
        error completion; EngineUnavailableError at ``max_consecutive_failures`` in a row."""
        self._failures_in_a_row += 1
        if self._failures_in_a_row >= self.max_consecutive_failures:
            raise self._unavailable(
                f"{self._failures_in_a_row} requests in a row failed after one had succeeded; the last: "
                f"{one_line(problem)}"
            ) from error
        logger.warning("chat completion failed%s: %s", ", sending it again" if transient else "", one_line(problem))
        return None if transient else Completion(text=f"{type(error).__name__}: {problem}", finish_reason="error")

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


class MalformedResponseError(ValueError):
    """A 200 response whose body is no chat completion (:func:`completion_of_body`)."""


def completion_of_body(body: bytes) -> Completion:
    """A Completion from the JSON body of a chat-completions response (its first choice);
    MalformedResponseError naming what is missing or malformed. The model's ``tool_calls`` are
    kept as sent, whatever their shape (the adapter reads them)."""
    try:
        response = json.loads(body)
    except (ValueError, RecursionError) as error:  # not UTF-8, not JSON, nested past the parser
        raise MalformedResponseError(f"not JSON ({one_line(error, 120)})") from None
    choices = response.get("choices") if isinstance(response, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedResponseError("no 'choices' list whose first item is an object")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise MalformedResponseError("'choices[0].message' is not an object")
    usage = response.get("usage")
    if usage is not None and not isinstance(usage, dict):
        raise MalformedResponseError("'usage' is neither an object nor null")
    logprobs = choice.get("logprobs")
    if logprobs is not None and not isinstance(logprobs, dict):
        raise MalformedResponseError("'choices[0].logprobs' is neither an object nor null")
    token_logprobs = (logprobs or {}).get("content")
    if token_logprobs is not None and not (
        isinstance(token_logprobs, list) and all(isinstance(item, dict) for item in token_logprobs)
    ):
        raise MalformedResponseError("'choices[0].logprobs.content' is not a list of objects")
    tool_calls = message.get("tool_calls")
    return Completion(
        text=_text(message, "content") or "",
        tool_calls=tool_calls or None,  # the model's: an observation whatever its shape
        reasoning=_text(message, "reasoning_content") or _text(message, "reasoning"),
        prompt_tokens=_count(usage or {}, "usage.prompt_tokens"),
        completion_tokens=_count(usage or {}, "usage.completion_tokens"),
        prompt_token_ids=_numbers(response.get("prompt_token_ids"), "prompt_token_ids", int),
        completion_token_ids=_numbers(choice.get("token_ids"), "choices[0].token_ids", int),
        finish_reason=_text(choice, "finish_reason"),
        logprobs=None
        if token_logprobs is None
        else _numbers(
            [item.get("logprob") for item in token_logprobs], "choices[0].logprobs.content[*].logprob", float
        ),
    )


def _text(mapping: Mapping[str, Any], key: str) -> str | None:
    value = mapping.get(key)
    if value is not None and not isinstance(value, str):
        raise MalformedResponseError(f"{key!r} is {type(value).__name__}, not a string or null")
    return value


def _count(usage: Mapping[str, Any], field: str) -> int:
    value = usage.get(field.rsplit(".", 1)[1], 0)
    if value is None:
        return 0
    if type(value) is not int or value < 0:
        raise MalformedResponseError(f"{field!r} is {one_line(value, 40)}, not a count")
    return value


def _numbers(values: Any, field: str, kind: type) -> list[Any] | None:
    """``values`` as a list of ``kind`` (int: integers; float: any number); None stays None."""
    if values is None:
        return None
    numbers = (int,) if kind is int else (int, float)
    if not isinstance(values, list) or not all(type(v) in numbers for v in values):
        raise MalformedResponseError(f"{field!r} is not a list of numbers")
    return [kind(v) for v in values]


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
