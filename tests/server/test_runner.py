"""``ace-gym serve`` as users run it: several workers behind one port, a killed worker replaced,
a barrage of hostile requests survived with bounded memory."""

from __future__ import annotations

import errno
import gc
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from multiprocessing.context import SpawnProcess
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the serve extra installs fastapi, uvicorn, websockets and httpx")

import httpx

from ace_gym.cli import main
from ace_gym.errors import ServerStartError
from ace_gym.server import runner
from ace_gym.server.config import ServerConfig
from ace_gym.server.runner import _server_app
from tests.server_helpers import ROOT, serve_process

QUERY = {"name": "get_current_grid_state", "arguments": {}}


def fresh(method: str, url: str, **kwargs: object) -> httpx.Response:
    """One request on a new connection, so that any worker may accept it."""
    with httpx.Client(timeout=30) as client:
        return client.request(method, url, **kwargs)  # type: ignore[arg-type]


@pytest.mark.slow
def test_workers__http_sessions_are_reached_from_any_connection() -> None:
    with serve_process("--env", "ACE-course-v0", "--workers", "3") as (url, _):
        session_ids: list[str] = []
        deadline = time.monotonic() + 60  # the first worker serves before the others have started
        while len(session_ids) < 12 or len({s.split("-")[0] for s in session_ids}) < 2:
            assert time.monotonic() < deadline, "every session opened in one worker"
            session_ids.append(fresh("POST", f"{url}/reset", json={"seed": len(session_ids)}).json()["session_id"])
        for session_id in session_ids:
            for _ in range(3):
                reply = fresh("POST", f"{url}/step", json={"session_id": session_id, "action": QUERY})
                assert reply.status_code == 200 and reply.json()["session_id"] == session_id
            assert fresh("GET", f"{url}/state", params={"session_id": session_id}).json()["step_count"] == 3
            assert fresh("POST", f"{url}/close", json={"session_id": session_id}).json()["closed"] is True
        forged = fresh("POST", f"{url}/step", json={"session_id": "2-" + "0" * 32, "action": QUERY})
        assert forged.status_code == 404 and forged.json()["code"] == "UNKNOWN_SESSION"


@pytest.mark.slow
def test_workers__a_killed_worker_is_replaced_and_its_sessions_are_unknown() -> None:
    with serve_process("--env", "ACE-course-v0", "--workers", "2") as (url, _):
        opened = {}
        while len(opened) < 2:  # one session in each worker
            reply = fresh("POST", f"{url}/reset", json={}).json()
            opened.setdefault(reply["session_id"].split("-")[0], reply["session_id"])
        pids = {}
        while len(pids) < 2:
            health = fresh("GET", f"{url}/health").json()
            pids[health["worker"]] = health["pid"]
        os.kill(pids[1], signal.SIGKILL)
        deadline = time.monotonic() + 60
        while True:
            try:
                health = fresh("GET", f"{url}/health").json()
                if health["worker"] == 1 and health["pid"] != pids[1]:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "worker 1 was not replaced"
        lost = fresh("POST", f"{url}/step", json={"session_id": opened["1"], "action": QUERY})
        assert lost.status_code == 404 and lost.json()["code"] == "UNKNOWN_SESSION"
        kept = fresh("POST", f"{url}/step", json={"session_id": opened["0"], "action": QUERY})
        assert kept.status_code == 200


def test_serve__unknown_env_id_or_data_dir_is_a_clear_error(capsys: pytest.CaptureFixture) -> None:
    assert main(["serve", "--env", "ACE-cours-v0"]) == 2
    assert "did you mean 'ACE-course-v0'" in capsys.readouterr().err
    assert main(["serve", "--data-dir", "/no/such/folder"]) == 2
    assert "not a directory" in capsys.readouterr().err


def serve_exit(*arguments: str, prelude: str = "", **environment: str) -> tuple[int, list[str]]:
    """``ace-gym serve ARGUMENTS`` expected to exit at once, in a process that first runs the
    Python code ``prelude`` and has ``environment`` added: (exit code, stderr lines)."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **environment}
    script = f"import sys\n{prelude}\nfrom ace_gym.cli import main\nsys.exit(main(sys.argv[1:]))"
    command = [sys.executable, "-c", script, "serve", "--env", "ACE-course-v0", "--log-level", "warning"]
    done = subprocess.run([*command, *arguments], capture_output=True, text=True, env=environment, timeout=120)
    return done.returncode, done.stderr.splitlines()


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize("port", ["99999", "-1"])
def test_serve__a_port_out_of_range_is_one_line_and_exit_2(port: str, workers: str) -> None:
    code, lines = serve_exit("--port", port, "--workers", workers)
    assert (code, lines) == (2, [f"ace-gym serve: port={port}: must be an integer in [0, 65535]"])


@pytest.mark.parametrize("workers", ["1", "2"])
def test_serve__a_port_in_use_is_one_line_and_exit_3(workers: str) -> None:
    with socket.create_server(("127.0.0.1", 0)) as holder:
        port = holder.getsockname()[1]
        code, lines = serve_exit("--port", str(port), "--workers", workers)
    assert code == 3 and len(lines) == 1, lines
    assert lines[0].startswith(f"ace-gym serve: cannot listen on 127.0.0.1:{port}: Address already in use"), lines


def test_serve__a_host_that_is_not_an_address_is_one_line_and_exit_2() -> None:
    code, lines = serve_exit("--host", "no-such-host.invalid", "--port", "0")
    assert code == 2 and len(lines) == 1 and "no-such-host.invalid" in lines[0], lines


FAILING_APP = """
import ace_gym.server.runner
def failing_app(config):
    raise RuntimeError("no app today")
ace_gym.server.runner._server_app = failing_app
"""


def test_serve__a_server_that_fails_while_starting_ends_with_one_line_and_exit_1() -> None:
    code, lines = serve_exit("--port", "0", prelude=FAILING_APP)
    assert code == 1 and lines, lines
    assert lines[-1] == "ace-gym serve: the server failed while starting: RuntimeError: no app today", lines


def test_serve__a_worker_that_fails_while_starting_ends_with_one_line_and_exit_1(tmp_path: Path) -> None:
    too_long = tmp_path / ("x" * 100)  # a folder whose worker sockets' paths are too long for AF_UNIX
    too_long.mkdir()
    code, lines = serve_exit("--port", "0", "--workers", "2", TMPDIR=str(too_long))
    assert code == 1 and lines, lines
    assert lines[-1].startswith("ace-gym serve: worker "), lines
    assert "failed while starting: OSError: cannot listen on " in lines[-1], lines
    assert lines[-1].endswith("worker-0.sock: AF_UNIX path too long") or "worker-1.sock" in lines[-1], lines
    assert list(too_long.iterdir()) == []  # the workers' socket folder is removed


@pytest.fixture
def opened_sockets(monkeypatch: pytest.MonkeyPatch) -> list[socket.socket]:
    """Every listening socket ``serve`` opens."""
    opened: list[socket.socket] = []

    def recording_listen(host: str, port: int) -> socket.socket:
        opened.append(listen(host, port))
        return opened[-1]

    listen = runner.listen
    monkeypatch.setattr(runner, "listen", recording_listen)
    return opened


def assert_port_released(listening: socket.socket, port: int) -> None:
    assert listening.fileno() == -1, "the listening socket was left open"
    with socket.create_server(("127.0.0.1", port)):  # a socket left listening there would refuse this
        pass


def test_serve__an_app_that_fails_to_build_releases_the_port(
    opened_sockets: list[socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing_app(config: ServerConfig) -> Any:
        port.append(opened_sockets[0].getsockname()[1])
        raise RuntimeError("no app today")

    port: list[int] = []
    monkeypatch.setattr(runner, "_server_app", failing_app)
    with pytest.raises(ServerStartError, match="the server failed while starting: RuntimeError: no app today"):
        runner.serve(ServerConfig(env_ids=("ACE-course-v0",)), "127.0.0.1", 0, log_level="critical")
    assert_port_released(opened_sockets[0], port[0])


def test_serve__workers_that_cannot_be_started_release_the_port_folder_and_signal_handlers(
    opened_sockets: list[socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing_start(process: SpawnProcess) -> None:
        port.append(opened_sockets[0].getsockname()[1])
        raise OSError(errno.EAGAIN, "Resource temporarily unavailable")

    def recording_mkdtemp(**kwargs: Any) -> str:
        folders.append(mkdtemp(**kwargs))
        return folders[-1]

    port: list[int] = []
    folders: list[str] = []
    mkdtemp = tempfile.mkdtemp
    monkeypatch.setattr(SpawnProcess, "start", failing_start)
    monkeypatch.setattr(tempfile, "mkdtemp", recording_mkdtemp)
    handlers = [signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)]
    config = ServerConfig(env_ids=("ACE-course-v0",), workers=2)
    with pytest.raises(ServerStartError, match=r"worker 0 could not be started: .*Resource temporarily unavailable"):
        runner.serve(config, "127.0.0.1", 0, log_level="critical")
    assert_port_released(opened_sockets[0], port[0])
    assert len(folders) == 1 and not os.path.exists(folders[0])
    assert [signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)] == handlers


@pytest.mark.slow
def test_hostile_barrage__server_answers_without_500s_and_returns_to_baseline() -> None:
    script = ROOT / "benchmarks" / "bench_server_hostile.py"
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    completed = subprocess.run(
        [sys.executable, str(script), "--count", "10000"], capture_output=True, text=True, env=environment, timeout=900
    )
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert report["failure_count"] == 0, report["failures"]
    assert report["server_alive"]
    assert report["sessions_after_barrage"] <= report["max_sessions"]
    assert report["sessions_after_idle_timeout"] == report["sessions_baseline"]
    assert report["rss_mb_after"] - report["rss_mb_baseline"] < 64
    assert completed.returncode == 0


def test_server_app__freezes_start_up_objects_out_of_the_collector() -> None:
    try:
        _server_app(ServerConfig(env_ids=("ACE-course-v0",)))
        assert gc.get_freeze_count() > 1000  # the modules and the app, not only what the test made
    finally:
        gc.unfreeze()
