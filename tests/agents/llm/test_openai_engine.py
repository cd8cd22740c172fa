"""The OpenAI-compatible engine against an in-test chat-completions server, and a real ``vllm serve``.

Most tests use a server that is not ``vllm serve``: it speaks the subset of the protocol the
engine uses (POST /v1/chat/completions with messages and tools; a response with
``choices[0].message`` content, tool_calls, reasoning_content, ``finish_reason`` and ``usage``)
and answers from a per-test script, so retries, concurrency and tool calls are checked
deterministically with the real ``openai`` client (127.0.0.1, ephemeral port). One slow test
plays episodes against a real ``vllm serve`` of the tiny random model (CPU build).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai")

from ace_gym.agents.base import ChatEngine
from ace_gym.agents.llm import make_engine
from ace_gym.agents.llm.openai_engine import OpenAIChatEngine
from ace_gym.errors import ConfigError, EngineUnavailableError
from ace_gym.eval import EpisodeSpec, run_episodes
from tests.chat_server import ChatServer, RawBody, Reply, chat_response, error, tool_call
from tests.ports import free_port


@pytest.fixture
def serve() -> Iterator[Callable[..., ChatServer]]:
    servers: list[ChatServer] = []

    def start(answer: Callable[[dict[str, Any]], Reply], delay_s: float = 0.0, listening: bool = True) -> ChatServer:
        servers.append(ChatServer(answer, delay_s, listening=listening))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def engine_for(server: ChatServer, **options: Any) -> OpenAIChatEngine:
    return OpenAIChatEngine("tiny", base_url=server.url, api_key="test", **options)


CONVERSATION = [{"role": "system", "content": "sys"}, {"role": "user", "content": "grid"}]
TOOLS = [
    {
        "type": "function",
        "function": {"name": "done", "description": "finish", "parameters": {"type": "object", "properties": {}}},
    }
]


def test_openai_engine__returns_native_tool_calls_reasoning_and_usage(serve: Callable[..., ChatServer]) -> None:
    server = serve(lambda body: (200, chat_response("ok", [tool_call("done", {})], reasoning="because")))
    with engine_for(server, sampling={"temperature": 0.5, "max_tokens": 64}) as engine:
        assert isinstance(engine, ChatEngine)
        (completion,) = engine.generate([CONVERSATION], [TOOLS])
    assert completion.text == "ok"
    assert completion.tool_calls == [tool_call("done", {})]
    assert completion.reasoning == "because"
    assert (completion.prompt_tokens, completion.completion_tokens, completion.finish_reason) == (100, 7, "tool_calls")
    (request,) = server.requests
    assert request["path"] == "/v1/chat/completions"
    assert (request["model"], request["temperature"], request["max_tokens"]) == ("tiny", 0.5, 64)
    assert request["messages"] == CONVERSATION and request["tools"] == TOOLS


def test_openai_engine__returns_logprobs_and_the_token_ids_a_vllm_server_adds(
    serve: Callable[..., ChatServer],
) -> None:
    def answer(body: dict[str, Any]) -> Reply:
        response = chat_response("ab")
        if body.get("logprobs"):
            content = [
                {"token": t, "logprob": lp, "bytes": None, "top_logprobs": []} for t, lp in (("a", -0.5), ("b", -1.25))
            ]
            response["choices"][0]["logprobs"] = {"content": content}
        if body.get("return_token_ids"):  # what vllm serve adds on request
            response["prompt_token_ids"] = [1, 2, 3]
            response["choices"][0]["token_ids"] = [7, 8]
        return 200, response

    server = serve(answer)
    with engine_for(server, sampling={"logprobs": True, "extra_body": {"return_token_ids": True}}) as engine:
        (completion,) = engine.generate([CONVERSATION], [TOOLS])
    assert completion.logprobs == [-0.5, -1.25]
    assert (completion.prompt_token_ids, completion.completion_token_ids) == ([1, 2, 3], [7, 8])
    with engine_for(server) as engine:  # not asked for: none reported
        (plain,) = engine.generate([CONVERSATION], [TOOLS])
    assert (plain.logprobs, plain.prompt_token_ids, plain.completion_token_ids) == (None, None, None)


def test_openai_engine__sends_history_with_string_arguments_and_no_reasoning_key(
    serve: Callable[..., ChatServer],
) -> None:
    server = serve(lambda body: (200, chat_response("x")))
    history = [
        *CONVERSATION,
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "r",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "done", "arguments": {"a": 1}}}],
        },
        {"role": "tool", "tool_call_id": "c1", "name": "done", "content": "{}"},
    ]
    with engine_for(server) as engine:
        engine.generate([history], [[]])
    sent = server.requests[0]
    assert "tools" not in sent
    assert "reasoning_content" not in sent["messages"][2]
    assert sent["messages"][2]["tool_calls"][0]["function"]["arguments"] == '{"a": 1}'
    assert sent["messages"][3] == history[3]


def test_openai_engine__client_retries_server_errors_then_succeeds(serve: Callable[..., ChatServer]) -> None:
    replies = iter([error(503), error(429), (200, chat_response("finally"))])
    server = serve(lambda body: next(replies))
    with engine_for(server, max_retries=3) as engine:
        (completion,) = engine.generate([CONVERSATION], [TOOLS])
    assert completion.text == "finally" and completion.finish_reason == "stop"
    assert len(server.requests) == 3


WARM_UP = [{"role": "user", "content": "warm-up"}]


def _warm_up_then(answer: Callable[[dict[str, Any]], Reply]) -> Callable[[dict[str, Any]], Reply]:
    """A server's answers: a completion for the WARM_UP conversation, ``answer`` for any other."""
    return lambda body: (200, chat_response("warm")) if body["messages"] == WARM_UP else answer(body)


def test_openai_engine__after_a_success_a_single_500_after_retries_is_sent_again(
    serve: Callable[..., ChatServer],
) -> None:
    replies = iter([error(500), error(500), error(500)])
    server = serve(_warm_up_then(lambda body: next(replies, (200, chat_response("recovered")))))
    with engine_for(server, max_retries=2) as engine:
        (warm,) = engine.generate([WARM_UP], [TOOLS])
        (completion,) = engine.generate([CONVERSATION], [TOOLS])
    assert warm.text == "warm" and completion.text == "recovered" and completion.finish_reason == "stop"
    assert len(server.requests) == 1 + 3 + 1  # the client's 3 attempts, then the engine's second request


# issue 40: after one success, an endpoint failing everything gave error turns and the run exit 0
EVERYTHING_FAILS: dict[str, Callable[[dict[str, Any]], Reply]] = {
    "500": lambda body: error(500),
    "400": lambda body: error(400),
    "302": lambda body: (302, {"error": "moved"}),
}


@pytest.mark.parametrize("answer", sorted(EVERYTHING_FAILS))
def test_openai_engine__after_a_success_an_endpoint_that_fails_everything_raises_unavailable(
    serve: Callable[..., ChatServer], answer: str
) -> None:
    server = serve(_warm_up_then(EVERYTHING_FAILS[answer]))
    conversations = [[{"role": "user", "content": f"episode {i}"}] for i in range(2)]
    with engine_for(server, max_retries=0, max_consecutive_failures=3) as engine:
        engine.generate([WARM_UP], [TOOLS])
        with pytest.raises(EngineUnavailableError) as raised:
            for _ in range(3):  # a 400 fails its conversation alone, but not three in a row
                engine.generate(conversations, [TOOLS] * 2)
    message = str(raised.value)
    assert server.url in message and f"HTTP {answer}" in message and "\n" not in message
    assert len(server.requests) <= 1 + 4


def test_openai_engine__after_a_success_a_rejected_request_fails_alone_without_retry(
    serve: Callable[..., ChatServer],
) -> None:
    server = serve(
        _warm_up_then(
            lambda body: error(400) if body["messages"][-1]["content"] == "bad" else (200, chat_response("good"))
        )
    )
    with engine_for(server, max_retries=3) as engine:
        engine.generate([WARM_UP], [TOOLS])
        bad, good = engine.generate([[{"role": "user", "content": "bad"}], CONVERSATION], [TOOLS, TOOLS])
    assert bad.finish_reason == "error" and "400" in bad.text and good.text == "good"
    assert len(server.requests) == 1 + 2


VLLM_OVER_THE_CONTEXT = (
    "This model's maximum context length is 4096 tokens. However, your prompt contains 5000 input tokens, "
    "which exceeds this limit even without any output tokens. Please reduce the length of the input prompt."
)
OVER_THE_CONTEXT_BODIES = {
    "vllm": {"object": "error", "message": VLLM_OVER_THE_CONTEXT, "type": "BadRequestError", "code": 400},
    "openai": {
        "error": {"message": "too many tokens", "type": "invalid_request_error", "code": "context_length_exceeded"}
    },
}


@pytest.mark.parametrize("served_before", [False, True], ids=["first-request", "after-a-success"])
@pytest.mark.parametrize("server_kind", sorted(OVER_THE_CONTEXT_BODIES))
def test_openai_engine__a_request_over_the_context_raises_a_config_error_quoting_the_server(
    serve: Callable[..., ChatServer], server_kind: str, served_before: bool
) -> None:
    """Issue 29: after a success it used to be an error turn that scored 0."""
    body = OVER_THE_CONTEXT_BODIES[server_kind]
    server = serve(_warm_up_then(lambda request: (400, body)))
    with engine_for(server, max_retries=0, sampling={"max_tokens": 512}) as engine:
        if served_before:
            engine.generate([WARM_UP], [TOOLS])
        with pytest.raises(ConfigError) as raised:
            engine.generate([CONVERSATION], [TOOLS])
    assert (raised.value.field, raised.value.value) == ("sampling.max_tokens", 512)
    message = str(raised.value)
    assert "'tiny'" in message and server.url in message and "\n" not in message
    assert (VLLM_OVER_THE_CONTEXT if server_kind == "vllm" else "too many tokens") in message


def test_openai_engine__episodes_over_the_context_raise_and_yield_no_record(serve: Callable[..., ChatServer]) -> None:
    server = serve(lambda request: (400, OVER_THE_CONTEXT_BODIES["vllm"]))
    specs = [EpisodeSpec.of(domain, instance_index=0, seed=1, max_turns=5) for domain in ("course", "shopping")]
    records: list[dict[str, Any]] = []
    with engine_for(server, max_retries=0) as engine, pytest.raises(ConfigError):
        records.extend(run_episodes(specs, engine, batch_size=2))
    assert records == []


VLLM_WITHOUT_TOOL_CHOICE = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'


@pytest.mark.parametrize("status", [400, 422, 500])
def test_openai_engine__an_endpoint_that_fails_every_request_raises_unavailable_naming_status_and_message(
    serve: Callable[..., ChatServer], status: int
) -> None:
    """What ``vllm serve`` without ``--enable-auto-tool-choice`` answers to every request with tools."""
    body = {"object": "error", "message": VLLM_WITHOUT_TOOL_CHOICE, "type": "BadRequestError", "code": status}
    server = serve(lambda request: (status, body))
    conversations = [[{"role": "user", "content": f"episode {i}"}] for i in range(3)]
    with engine_for(server, max_retries=0) as engine, pytest.raises(EngineUnavailableError) as raised:
        engine.generate(conversations, [TOOLS] * 3)
    message = str(raised.value)
    assert message.startswith(f"model endpoint {server.url}/ (model 'tiny'): HTTP {status}")
    assert VLLM_WITHOUT_TOOL_CHOICE in message and "\n" not in message


def test_openai_engine__a_500_before_any_success_raises_unavailable_after_retries(
    serve: Callable[..., ChatServer],
) -> None:
    server = serve(lambda body: error(500))
    with engine_for(server, max_retries=2) as engine, pytest.raises(EngineUnavailableError) as raised:
        engine.generate([CONVERSATION], [TOOLS])
    assert "HTTP 500 after 2 retries" in str(raised.value) and len(server.requests) == 3


@pytest.fixture
def never_answered() -> Iterator[threading.Event]:
    """Set at the test's end: until then the server holds every request that is not WARM_UP."""
    release = threading.Event()
    yield release
    release.set()


def test_openai_engine__a_timeout_before_any_success_raises_unavailable_naming_timeout_s(
    serve: Callable[..., ChatServer], never_answered: threading.Event
) -> None:
    server = serve(lambda body: (never_answered.wait(30), (200, chat_response("late")))[1])
    with engine_for(server, max_retries=0, timeout_s=0.5) as engine, pytest.raises(EngineUnavailableError) as raised:
        engine.generate([CONVERSATION], [TOOLS])
    message = str(raised.value)
    assert message.startswith(f"model endpoint {server.url}/ (model 'tiny'): no answer within timeout_s=0.5")
    assert "before any request succeeded" in message


def test_openai_engine__after_a_success_a_timeout_is_sent_again_and_timeouts_in_a_row_raise(
    serve: Callable[..., ChatServer], never_answered: threading.Event
) -> None:
    slow = iter([True])
    server = serve(
        _warm_up_then(lambda body: (next(slow, False) and never_answered.wait(30), (200, chat_response("late")))[1])
    )
    with engine_for(server, max_retries=0, timeout_s=0.5) as engine:
        (warm,) = engine.generate([WARM_UP], [TOOLS])
        (answered,) = engine.generate([CONVERSATION], [TOOLS])  # the first attempt times out
        assert warm.text == "warm" and answered.text == "late"
        server.answer = _warm_up_then(lambda body: (never_answered.wait(30), (200, chat_response("never")))[1])
        with pytest.raises(EngineUnavailableError, match=r"3 requests in a row failed.*timeout_s=0\.5"):
            engine.generate([CONVERSATION], [TOOLS])


MALFORMED_BODIES: dict[str, dict[str, Any] | RawBody] = {
    "empty object": {},
    "empty choices": {**chat_response("x"), "choices": []},
    "null choices": {**chat_response("x"), "choices": None},
    "null message": {**chat_response("x"), "choices": [{"index": 0, "message": None, "finish_reason": "stop"}]},
    "html page": RawBody(b"<!DOCTYPE html><html><body>Bad gateway</body></html>", "text/html"),
    "truncated json": RawBody(json.dumps(chat_response("x")).encode()[:40]),
    "not utf-8": RawBody(b'{"choices": [{"message": {"content": "\xff\xfe"}}]}'),
    "string usage": {**chat_response("x"), "usage": "many"},
    "list usage": {**chat_response("x"), "usage": [1, 2]},
    "string token count": {**chat_response("x"), "usage": {"prompt_tokens": "5", "completion_tokens": 1}},
    "bad logprobs": {
        **chat_response("x"),
        "choices": [{"index": 0, "message": {"content": "x"}, "logprobs": {"content": [{"logprob": "low"}]}}],
    },
    "string logprobs": {**chat_response("x"), "choices": [{"index": 0, "message": {"content": "x"}, "logprobs": "x"}]},
    "number content": {**chat_response("x"), "choices": [{"index": 0, "message": {"content": 5}}]},
}


@pytest.mark.parametrize("served_before", [False, True], ids=["first-request", "after-a-success"])
@pytest.mark.parametrize("body", sorted(MALFORMED_BODIES))
def test_openai_engine__a_200_whose_body_is_no_chat_completion_raises_unavailable(
    serve: Callable[..., ChatServer], body: str, served_before: bool
) -> None:
    server = serve(_warm_up_then(lambda request: (200, MALFORMED_BODIES[body])))
    with engine_for(server, max_retries=0) as engine:
        if served_before:
            engine.generate([WARM_UP], [TOOLS])
        with pytest.raises(EngineUnavailableError) as raised:
            engine.generate([CONVERSATION], [TOOLS])
    message = str(raised.value)
    assert message.startswith(f"model endpoint {server.url}/ (model 'tiny'): HTTP 200 with a body that is no chat")
    assert "\n" not in message


@pytest.mark.parametrize("tool_calls", ["get_current_grid_state", [None, 5], {"name": "done"}, 7, [[1]]])
def test_openai_engine__malformed_tool_calls_from_the_model_are_an_observation(
    serve: Callable[..., ChatServer], tool_calls: Any
) -> None:
    """Issue 40: a string or ``[null, 5]`` crashed the run with an AttributeError."""

    def answer(body: dict[str, Any]) -> Reply:
        response = chat_response("thinking")
        response["choices"][0]["message"]["tool_calls"] = tool_calls
        return 200, response

    server = serve(answer)
    with engine_for(server, max_retries=0) as engine:
        (record,) = run_episodes([EpisodeSpec.of("course", instance_index=0, max_turns=2)], engine)
    assert record["usage"]["turns"] == 2 and record["score"] == 0.0
    correction = record["messages"][3]
    assert correction["role"] == "user" and "tool_calls" in correction["content"]
    json.dumps(record)  # a record like any other


@pytest.mark.parametrize("status", [401, 403, 404])
def test_openai_engine__wrong_key_or_model_raises_unavailable_naming_url_and_status(
    serve: Callable[..., ChatServer], status: int
) -> None:
    server = serve(lambda body: error(status))
    with engine_for(server, max_retries=3) as engine, pytest.raises(EngineUnavailableError) as raised:
        engine.generate([CONVERSATION], [TOOLS])
    message = str(raised.value)
    assert server.url in message and f"HTTP {status}" in message and "'tiny'" in message
    assert "\n" not in message and len(server.requests) == 1  # one line; refusals are not retried
    assert (status == 404) == ("<base URL>/chat/completions, so it usually ends in /v1" in message)


@pytest.mark.parametrize("status", [429, 503])
def test_openai_engine__an_endpoint_still_unavailable_after_retries_raises(
    serve: Callable[..., ChatServer], status: int
) -> None:
    server = serve(lambda body: error(status))
    with engine_for(server, max_retries=2) as engine, pytest.raises(EngineUnavailableError) as raised:
        engine.generate([CONVERSATION], [TOOLS])
    message = str(raised.value)
    assert server.url in message and f"HTTP {status}" in message and "after 2 retries" in message
    assert len(server.requests) == 3


def test_openai_engine__a_refused_connection_raises_unavailable_naming_the_url(
    serve: Callable[..., ChatServer],
) -> None:
    server = serve(lambda body: (200, chat_response("never")), listening=False)  # bound, refusing connections
    conversations = [[{"role": "user", "content": f"episode {i}"}] for i in range(4)]
    with engine_for(server, max_retries=0) as engine, pytest.raises(EngineUnavailableError) as raised:
        engine.generate(conversations, [TOOLS] * 4)
    assert str(raised.value).startswith(f"model endpoint {server.url}") and "ConnectionRefusedError" in str(
        raised.value
    )
    assert "\n" not in str(raised.value)


def test_openai_engine__without_url_names_the_base_url_it_tried(
    serve: Callable[..., ChatServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = serve(lambda body: (200, chat_response("never")), listening=False)
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    engine = make_engine("openai:fake", max_retries=0)
    try:
        with pytest.raises(EngineUnavailableError) as raised:
            engine.generate([CONVERSATION], [TOOLS])
        assert str(raised.value).startswith(f"model endpoint {server.url}/ (model 'fake'): cannot connect")
    finally:
        engine.close()  # type: ignore[attr-defined]


def test_openai_engine__episodes_on_a_dead_endpoint_raise_and_yield_no_record(
    serve: Callable[..., ChatServer],
) -> None:
    server = serve(lambda body: (200, chat_response("never")), listening=False)
    specs = [EpisodeSpec.of(domain, instance_index=0, seed=1, max_turns=5) for domain in ("course", "shopping")]
    records: list[dict[str, Any]] = []
    with engine_for(server, max_retries=0) as engine, pytest.raises(EngineUnavailableError):
        records.extend(run_episodes(specs, engine, batch_size=2))
    assert records == []


def test_openai_engine__keeps_at_most_max_concurrency_requests_in_flight(serve: Callable[..., ChatServer]) -> None:
    server = serve(lambda body: (200, chat_response(body["messages"][-1]["content"])), delay_s=0.1)
    conversations = [[{"role": "user", "content": f"episode {i}"}] for i in range(10)]
    with engine_for(server, max_concurrency=3) as engine:
        completions = engine.generate(conversations, [TOOLS] * 10)
    assert [c.text for c in completions] == [f"episode {i}" for i in range(10)]  # order kept
    assert 1 < server.max_in_flight <= 3


def test_openai_engine__episodes_through_the_adapter_and_collector(serve: Callable[..., ChatServer]) -> None:
    """A scripted 'model' reads the grid, then calls done: the episodes end by done with score 0."""

    def answer(body: dict[str, Any]) -> Reply:
        turns = sum(m["role"] == "assistant" for m in body["messages"])
        name = "get_current_grid_state" if turns == 0 else "done"
        return 200, chat_response("", [tool_call(name, {}, f"call_{turns}")])

    server = serve(answer)
    specs = [EpisodeSpec.of(domain, instance_index=0, seed=1, max_turns=5) for domain in ("course", "shopping")]
    with engine_for(server) as engine:
        records = list(run_episodes(specs, engine, batch_size=2))
    assert len(server.requests) == 4  # two turns per episode, each turn one batched request per episode
    for record in records:
        assert record["terminated"] and record["score"] == 0 and record["reason"]
        assert record["usage"]["turns"] == 2 and record["usage"]["tool_calls"] == 2
        assert record["usage"]["prompt_tokens"] == 200 and record["usage"]["completion_tokens"] == 14
        tool_messages = [m for m in record["messages"] if m["role"] == "tool"]
        assert [m["name"] for m in tool_messages] == ["get_current_grid_state", "done"]
        assert json.loads(tool_messages[0]["content"])["status"] == "success"
        assert {t["function"]["name"] for t in server.requests[0]["tools"]} >= {"set_slot", "done"}


@pytest.mark.slow
def test_openai_engine__plays_episodes_against_a_real_vllm_server(tmp_path: Path) -> None:
    """``vllm serve`` (CPU build) of the tiny random model on 127.0.0.1, hermes tool parser on."""
    pytest.importorskip("vllm")
    from ace_gym.agents.llm.tiny_model import build_tiny_model

    model = build_tiny_model(tmp_path / "tiny")
    port = free_port()
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model)]
    command += ["--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32"]
    command += ["--enforce-eager", "--gpu-memory-utilization", "0.2", "--max-model-len", "8192"]
    command += ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
    with (tmp_path / "server.log").open("w") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            _wait_until_healthy(f"http://127.0.0.1:{port}/health", server, tmp_path / "server.log")
            specs = [EpisodeSpec.of(domain, instance_index=0, seed=0, max_turns=2) for domain in ("course", "meal")]
            sampling = {"max_tokens": 8, "logprobs": True, "extra_body": {"return_token_ids": True}}
            engine = OpenAIChatEngine("tiny", base_url=f"http://127.0.0.1:{port}/v1", sampling=sampling)
            with engine:
                records = list(run_episodes(specs, engine, batch_size=2))
        finally:
            server.terminate()
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
    for record in records:
        assert record["usage"]["turns"] == 2 and record["score"] == 0
        for turn in record["turns"]:
            assert turn["finish_reason"] in ("stop", "length", "tool_calls"), turn
            assert turn["prompt_tokens"] > 1000 and 1 <= turn["completion_tokens"] <= 8
            assert len(turn["logprobs"]) == len(turn["completion_token_ids"]) == turn["completion_tokens"]
            assert turn["prompt_token_ids"] and all(lp <= 0 for lp in turn["logprobs"])


def _wait_until_healthy(url: str, server: subprocess.Popen, log: Path, timeout_s: float = 600.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"vllm server exited with {server.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(2)
    pytest.fail(f"vllm server not healthy after {timeout_s:.0f} s:\n{log.read_text()[-3000:]}")
