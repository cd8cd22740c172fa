"""LLM chat engines: vLLM offline, local transformers, and OpenAI-compatible servers.

Each engine implements :class:`~ace_gym.agents.base.ChatEngine` (one batched ``generate`` per
turn). The back-end libraries are optional extras and imported only when an engine is built:
``pip install ".[vllm]"``, ``".[hf]"`` or ``".[openai]"``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ace_gym.errors import ConfigError, did_you_mean

if TYPE_CHECKING:
    from ace_gym.agents.base import ChatEngine

logger = logging.getLogger(__name__)

ENGINE_KINDS = ("vllm", "hf", "openai")
"""The ``KIND`` prefixes :func:`make_engine` understands."""


def make_engine(spec: str, **options: Any) -> ChatEngine:
    """Build a chat engine from a policy string; ``options`` go to the engine's constructor.

    ``"vllm:MODEL_PATH"`` -> :class:`~ace_gym.agents.llm.vllm_engine.VLLMChatEngine`,
    ``"hf:MODEL_PATH"`` -> :class:`~ace_gym.agents.llm.hf_engine.HFChatEngine`,
    ``"openai:MODEL@URL"`` -> :class:`~ace_gym.agents.llm.openai_engine.OpenAIChatEngine` (URL is
    the server's base URL, e.g. ``http://127.0.0.1:8000/v1``: requests go to ``URL/chat/completions``;
    a URL without a path, ``http://127.0.0.1:8000``, gets ``/v1``, where vLLM, SGLang, llama.cpp,
    Ollama and OpenAI serve, with a warning saying so; without ``@URL`` the client's default, i.e.
    ``OPENAI_BASE_URL`` or the OpenAI API). Raises ConfigError for any other shape.
    """
    kind, sep, target = spec.partition(":")
    if not sep or not target:
        raise ConfigError("policy", spec, "expected KIND:TARGET with KIND one of " + ", ".join(ENGINE_KINDS))
    if kind == "vllm":
        from ace_gym.agents.llm.vllm_engine import VLLMChatEngine

        return VLLMChatEngine(target, **options)
    if kind == "hf":
        from ace_gym.agents.llm.hf_engine import HFChatEngine

        return HFChatEngine(target, **options)
    if kind == "openai":
        from ace_gym.agents.llm.openai_engine import OpenAIChatEngine

        model, at, url = target.partition("@")
        if not model or (at and not url):
            raise ConfigError("policy", spec, "expected openai:MODEL or openai:MODEL@URL")
        return OpenAIChatEngine(model, base_url=_base_url(spec, url) if url else None, **options)
    raise ConfigError(
        "policy", spec, f"unknown engine {kind!r}; known: {', '.join(ENGINE_KINDS)}{did_you_mean(kind, ENGINE_KINDS)}"
    )


def _base_url(spec: str, url: str) -> str:
    """The base URL of an ``openai:MODEL@URL`` spec: an http(s) URL, ``/v1`` added when it has no path."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError("policy", spec, f"URL {url!r} is no http:// or https:// URL (e.g. http://127.0.0.1:8000/v1)")
    if parts.path.strip("/"):
        return url
    with_v1 = parts._replace(path="/v1").geturl()
    logger.warning(
        "%s has no path: using %s (OpenAI-compatible servers answer at /v1/chat/completions); give the full "
        "base URL to use another path",
        url,
        with_v1,
    )
    return with_v1


__all__ = ["ENGINE_KINDS", "make_engine"]
