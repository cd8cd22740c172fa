"""``ace-gym eval`` with a model it cannot reach or load: one line naming the URL or path, exit 7,
no record stored for the episodes it could not play, and the same command plays them later."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ace_gym.exit_codes import EXIT_CONFIG, EXIT_ENGINE
from ace_gym.runs.results import read_records
from tests.chat_server import ChatServer, Reply, chat_response, tool_call
from tests.eval.test_cli import MEAL, one_error_line, run_cli


def _reads_the_grid_then_done(body: dict[str, Any]) -> Reply:
    turns = sum(message["role"] == "assistant" for message in body["messages"])
    name = "get_current_grid_state" if turns == 0 else "done"
    return 200, chat_response("", [tool_call(name, {}, f"call_{turns}")])


def _eval_command(server: ChatServer, out: Path) -> list[str]:
    """``ace-gym eval`` of one two-turn meal episode against ``server``, without retries."""
    command = ["--policy", f"openai:fake@{server.url}", "--engine-option", "max_retries=0", *MEAL]
    return [*command, "--max-turns", "2", "--out", str(out)]


def test_eval__an_unreachable_endpoint_exits_7_naming_the_url_stores_nothing_and_the_rerun_plays_it(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    pytest.importorskip("openai")
    server = ChatServer(_reads_the_grid_then_done, listening=False)  # its port refuses connections
    out = tmp_path / "run"
    command = _eval_command(server, out)
    try:
        assert run_cli(*command) == EXIT_ENGINE
        line = one_error_line(capsys)
        assert f"model endpoint {server.url}" in line and "ConnectionRefusedError" in line
        assert list(read_records(out / "episodes.jsonl")) == []  # no 0.000 stored for it
        summary = json.loads((out / "summary.json").read_text())  # the run's identity, and no score
        assert summary["episodes"] == 0 and summary["overall"]["score"] is None

        server.listen()  # the endpoint comes up: the same command plays the episode
        assert run_cli(*command) == 0
        assert "resuming" not in capsys.readouterr().err
        (record,) = read_records(out / "episodes.jsonl")
        assert record["usage"]["turns"] == 2 and len(server.requests) == 2
    finally:
        server.close()


def test_eval__an_endpoint_that_answers_400_to_every_request_exits_7_and_stores_no_score(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``vllm serve`` without ``--enable-auto-tool-choice`` refuses every request that carries tools."""
    pytest.importorskip("openai")
    refusal = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
    server = ChatServer(lambda body: (400, {"object": "error", "message": refusal, "code": 400}))
    out = tmp_path / "run"
    command = _eval_command(server, out)
    try:
        assert run_cli(*command) == EXIT_ENGINE
        line = one_error_line(capsys)
        assert f"model endpoint {server.url}" in line and "HTTP 400" in line and refusal in line
        assert list(read_records(out / "episodes.jsonl")) == []  # no 0.000 stored for it

        server.answer = _reads_the_grid_then_done  # the server restarted with tool calling on
        assert run_cli(*command) == 0
        (record,) = read_records(out / "episodes.jsonl")
        assert record["usage"]["turns"] == 2
    finally:
        server.close()


@pytest.mark.parametrize("failure", ["500", "400", "302", "malformed"])
def test_eval__an_endpoint_that_fails_everything_after_one_success_exits_7_and_stores_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture, failure: str
) -> None:
    """Issue 40: the failures became error turns in scored episodes and the run exited 0."""
    pytest.importorskip("openai")
    answers = {
        "500": (500, {"error": {"message": "boom"}}),
        "400": (400, {"error": {"message": "refused"}}),
        "302": (302, {"error": "moved"}),
        "malformed": (200, {"choices": []}),
    }
    served = iter([_reads_the_grid_then_done({"messages": []})])
    server = ChatServer(lambda body: next(served, answers[failure]))
    out = tmp_path / "run"
    try:
        assert run_cli(*_eval_command(server, out), "--max-turns", "4") == EXIT_ENGINE
        line = one_error_line(capsys)
        assert f"model endpoint {server.url}" in line
        assert list(read_records(out / "episodes.jsonl")) == []  # the episode in flight stores nothing
    finally:
        server.close()


def test_eval__a_model_path_that_does_not_load_exits_7_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    missing = tmp_path / "no-such-model"
    out = tmp_path / "run"
    assert run_cli("--policy", f"hf:{missing}", *MEAL, "--out", str(out)) == EXIT_ENGINE
    line = one_error_line(capsys)
    assert f"model {missing}: cannot load" in line
    assert list(read_records(out / "episodes.jsonl")) == []


def test_eval__a_bad_dtype_for_a_model_that_loads_exits_2_naming_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A configuration mistake, not exit 7's "re-run once the model is available"."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from ace_gym.agents.llm.tiny_model import build_tiny_model

    model = build_tiny_model(tmp_path / "tiny")
    capsys.readouterr()  # its progress bars
    out = tmp_path / "run"
    assert run_cli("--policy", f"hf:{model}", "--engine-option", "dtype=int8", *MEAL, "--out", str(out)) == EXIT_CONFIG
    line = one_error_line(capsys)
    assert "dtype='int8'" in line and "floating-point" in line
