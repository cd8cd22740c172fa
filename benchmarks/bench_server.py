"""Env server load: 1,000 concurrent WebSocket sessions on one machine (loopback), steps/s and
per-step latency.

Starts ``ace-gym serve --workers W`` and P load-generator processes; each process multiplexes its
share of the sessions on one asyncio loop, one step in flight per session. The client (``--client``)
is ``raw`` (default), the minimal asyncio-Protocol WebSocket client in ``raw_websocket.py`` (each
session masks its four step frames once, with one random mask key per session, and a reset frame
when it sends it; see that module), or ``aiohttp`` (``pip install aiohttp``; what earlier runs
used), to compare the load generator's own cost; both send the same compact JSON frames. Every
reply is decoded (orjson) and a reply that is not an observation counts as an error. Every session
resets with its own seed, then plays a cycle of four tool calls (attribute query, item info, slot
check, grid state) and resets again every 50 steps (resets are not counted as steps); each
session's first episode ends after a random 1-50 steps (seeded by the session), so that sessions
reset at different times as a rollout's episodes do, not all 1,000 in the same tenth of a second
(``--lockstep-resets`` measures that burst). Once every session is open and reset, steps are counted for ``--seconds``;
latency is measured per step at the client, from sending the frame to parsing the reply.

Two loads:

* open loop (``--rate R``, default 10,000): the sessions together offer R steps/s, each session
  one step every ``sessions / R`` seconds (a policy thinking between steps); prints the achieved
  rate and the latency at that load. A session whose reply comes after its next send time sends
  at once (no catch-up burst) and counts as late.
* closed loop (``--rate 0``): each session sends its next step as soon as the reply arrives; the
  server's saturation throughput. Latency is then sessions / throughput by Little's law, so with
  1,000 sessions a p99 under 20 ms would need over 50,000 steps/s: the latency target is one of the
  open-loop load.

Target (issue 15): >= 10,000 steps/s and p99 < 20 ms with 4 workers on 2 cores. The load
generator runs on the same cores; the printed CPU split says how much of them it took. Prints
one JSON line.

    python benchmarks/bench_server.py                              # 1000 sessions, 10k steps/s offered
    python benchmarks/bench_server.py --rate 0                     # closed loop: saturation
    python benchmarks/bench_server.py --sessions 200 --workers 1 --rate 2000 --seconds 10
    python benchmarks/bench_server.py --client aiohttp             # the same load from aiohttp clients
    python benchmarks/bench_server.py --server ace-gym openenv --rounds 2   # against openenv-core's app
    python benchmarks/bench_server.py --quick --server ace-gym openenv      # a seconds-long smoke run

``--server`` names the servers measured in turn (``--rounds`` times) under the same load:
``ace-gym`` (``ace-gym serve``), ``openenv`` (openenv-core's ``create_app`` over
:class:`ace_gym.integrations.openenv.AceEnvironment`, steps on the event loop, started as
``uvicorn --factory`` with ``ace-gym serve``'s uvicorn settings) and ``openenv-threads`` (the same
with openenv-core's default executor per session). Each run prints its JSON line; with several
servers a last line compares each to the first (ratios of the means over the rounds, and issue
31's rule: within 20 % on steps/s and p99).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import raw_websocket

from ace_gym.server.client import wait_until_ready

ROOT = Path(__file__).resolve().parents[1]
STEPS_PER_EPISODE = 50
ACTIONS = [
    {
        "name": "query_course_candidate_from_attribute",
        "arguments": {"row": 2, "col": 3, "field": "price", "operator": "<=", "value": 300},
    },
    {"name": "get_course_item_info", "arguments": {"id": "C1843"}},
    {"name": "check_course_slot_constraints", "arguments": {"row": 0, "col": 0}},
    {"name": "get_current_grid_state", "arguments": {}},
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its direct children so far (Linux /proc)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for each in [pid, *(int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split())]:
        fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total


class AiohttpConnection:
    """An aiohttp WebSocket behind the raw client's ``frame``/``request`` interface."""

    def __init__(self, websocket: Any) -> None:
        self.websocket = websocket

    def frame(self, payload: bytes) -> str:
        return payload.decode()

    async def request(self, frame: str) -> str:
        await self.websocket.send_str(frame)
        return (await self.websocket.receive()).data  # type: ignore[no-any-return]


Opener = Callable[[str], AbstractAsyncContextManager[Any]]


@contextlib.asynccontextmanager
async def open_raw(url: str) -> AsyncIterator[raw_websocket.RawWebSocket]:
    connection = await raw_websocket.connect(url)
    try:
        yield connection
    finally:
        await connection.close()


def aiohttp_opener(client: Any) -> Opener:
    """Connections of one ``aiohttp.ClientSession``, as the old load generator opened them."""

    @contextlib.asynccontextmanager
    async def open_aiohttp(url: str) -> AsyncIterator[AiohttpConnection]:
        async with client.ws_connect(url, compress=0, max_msg_size=0) as websocket:
            yield AiohttpConnection(websocket)

    return open_aiohttp


class Session:
    """One WebSocket session of the load generator."""

    def __init__(self, seed: int, period: float, out: dict[str, Any], lockstep: bool) -> None:
        self.seed, self.period, self.out, self.lockstep = seed, period, out, lockstep

    def mark_ready(self, ready: asyncio.Event) -> None:
        self.out["ready"] += 1
        if self.out["ready"] == self.out["sessions"]:
            ready.set()

    async def run(
        self, opener: Opener, url: str, ready: asyncio.Event, start: asyncio.Event, stop: asyncio.Event
    ) -> None:
        try:
            await self.play(opener, url, ready, start, stop)
        except Exception as error:  # a session that could not open is reported, not waited for
            self.out["failed_sessions"].append(f"{type(error).__name__}: {error}")
            if not start.is_set():
                self.mark_ready(ready)

    async def play(
        self, opener: Opener, url: str, ready: asyncio.Event, start: asyncio.Event, stop: asyncio.Event
    ) -> None:
        async with opener(url) as connection:
            frames = [connection.frame(orjson.dumps({"type": "step", "data": action})) for action in ACTIONS]

            async def call(frame: Any) -> dict[str, Any]:
                return orjson.loads(await connection.request(frame))  # type: ignore[no-any-return]

            def reset_frame(seed: int) -> Any:
                return connection.frame(orjson.dumps({"type": "reset", "data": {"seed": seed}}))

            await call(reset_frame(self.seed))
            self.mark_ready(ready)
            await start.wait()
            loop = asyncio.get_running_loop()
            next_send = loop.time() + random.random() * self.period
            steps = 0
            # the first episode is cut short at a random step so that sessions end their episodes
            # out of step, as a rollout's episodes do (in lock-step, 1,000 resets would land in
            # the same tenth of a second every 50 steps)
            episode_end = STEPS_PER_EPISODE if self.lockstep else random.Random(self.seed).randint(1, STEPS_PER_EPISODE)
            while not stop.is_set():
                if self.period:
                    delay = next_send - loop.time()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    else:  # the last reply came after this send was due
                        self.out["late"] += 1
                        next_send = loop.time()
                    next_send += self.period
                began = time.perf_counter()
                reply = await call(frames[steps % len(frames)])
                self.out["latencies"].append(time.perf_counter() - began)
                if reply["type"] != "observation":
                    self.out["errors"] += 1
                steps += 1
                if steps == episode_end or reply["data"].get("done"):
                    episode_end = steps + STEPS_PER_EPISODE
                    await call(reset_frame(self.seed + steps))
                    self.out["resets"] += 1


def client_process(
    client_kind: str,
    url: str,
    seeds: list[int],
    period: float,
    barrier: Any,
    seconds: float,
    results: Any,
    lockstep: bool,
) -> None:
    """One load-generator process: its sessions on one event loop, on ``client_kind`` connections."""
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass

    async def run() -> dict[str, Any]:
        ready, start, stop = asyncio.Event(), asyncio.Event(), asyncio.Event()
        out: dict[str, Any] = {
            "ready": 0,
            "sessions": len(seeds),
            "latencies": [],
            "errors": 0,
            "resets": 0,
            "late": 0,
            "failed_sessions": [],
        }
        async with contextlib.AsyncExitStack() as stack:
            opener: Opener = open_raw
            if client_kind == "aiohttp":
                import aiohttp

                connector = aiohttp.TCPConnector(limit=0)
                opener = aiohttp_opener(await stack.enter_async_context(aiohttp.ClientSession(connector=connector)))
            tasks = [
                asyncio.create_task(Session(seed, period, out, lockstep).run(opener, url, ready, start, stop))
                for seed in seeds
            ]
            await ready.wait()
            await asyncio.get_running_loop().run_in_executor(None, barrier.wait)  # every process ready
            out["latencies"].clear()
            out["resets"] = out["late"] = 0
            start.set()
            began, times = time.perf_counter(), os.times()
            await asyncio.sleep(seconds)
            stop.set()
            elapsed, after = time.perf_counter() - began, os.times()
            user, system = after.user - times.user, after.system - times.system
            steps = len(out["latencies"])  # steps finished inside the window
            await asyncio.gather(*tasks)
        return {
            **out,
            "latencies": out["latencies"][:steps],
            "steps": steps,
            "elapsed": elapsed,
            "cpu": user + system,
            "system_cpu": system,
        }

    results.put(asyncio.run(run()))


def local_step_seconds() -> float:
    """Seconds per ``env.step`` of the same action cycle in this process (no server)."""
    import gymnasium as gym

    import ace_gym  # noqa: F401  (registers the ids)

    env = gym.make("ACE-course-v0", disable_env_checker=True)
    count = 20_000
    began = time.perf_counter()
    for n in range(count):
        if n % STEPS_PER_EPISODE == 0:
            env.reset(seed=n)
        env.step(ACTIONS[n % len(ACTIONS)])
    return (time.perf_counter() - began) / count


SERVERS = ("ace-gym", "openenv", "openenv-threads")
"""``ace-gym serve``; openenv-core's ``create_app`` over :class:`ace_gym.integrations.openenv.AceEnvironment`
with steps and resets on the event loop; the same with openenv-core's default, each session's calls
in its own one-thread executor."""

WS_PATHS = {"ace-gym": "/envs/ACE-course-v0/ws", "openenv": "/ws", "openenv-threads": "/ws"}


def start_server(kind: str, workers: int, max_sessions: int, log: Any) -> tuple[subprocess.Popen[bytes], str]:
    """The server ``kind`` (:data:`SERVERS`) on a free loopback port with ``workers`` worker
    processes, its stderr to the file ``log``, ready: (process, base URL). openenv-core's app runs under the uvicorn settings
    ``ace-gym serve`` uses (``ace_gym.server.runner.uvicorn_options``): sans-I/O websockets, no
    per-message deflate, frames up to 1 MiB, httptools, no access log, uvicorn's ``--workers``."""
    if kind == "ace-gym":
        server, base = launch_ace_gym("--workers", str(workers), "--max-sessions", str(max_sessions), stderr=log)
    else:
        server, base = launch_openenv(kind, workers, max_sessions, log)
    try:
        wait_until_ready(base, timeout_s=START_TIMEOUT_S)
        wait_until_idle(server.pid)
    except BaseException:
        stop_server(server)
        log.seek(0)
        sys.stderr.write(log.read().decode(errors="replace")[-4000:])
        raise
    return server, base


def start_ace_gym(*options: str) -> tuple[subprocess.Popen[bytes], str]:
    """``ace-gym serve`` with ``options`` on a free loopback port, ready: (process, base URL)."""
    server, base = launch_ace_gym(*options)
    try:
        wait_until_ready(base, timeout_s=START_TIMEOUT_S)
    except BaseException:
        stop_server(server)
        raise
    return server, base


def launch_ace_gym(*options: str, stderr: Any = None) -> tuple[subprocess.Popen[bytes], str]:
    """``ace-gym serve`` with ``options`` on a free loopback port, its stderr to ``stderr`` (None:
    inherited), started: (process, base URL)."""
    port = free_port()
    command = [sys.executable, "-m", "ace_gym", "serve", "--port", str(port), "--log-level", "warning", *options]
    server = subprocess.Popen(
        command, env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=stderr, start_new_session=True
    )
    return server, f"http://127.0.0.1:{port}"


def launch_openenv(kind: str, workers: int, max_sessions: int, log: Any) -> tuple[subprocess.Popen[bytes], str]:
    """openenv-core's app (``benchmarks/openenv_app.py``) as ``start_server`` describes, started."""
    port = free_port()
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "uvicorn", "--factory", "openenv_app:create_app"]
    command += ["--app-dir", str(ROOT / "benchmarks"), "--host", "127.0.0.1", "--port", str(port)]
    command += ["--workers", str(workers), "--ws", "websockets-sansio", "--ws-per-message-deflate", "false"]
    command += ["--ws-max-size", str(1 << 20), "--http", "httptools", "--no-access-log", "--log-level", "warning"]
    environment["BENCH_OPENENV_MAX_SESSIONS"] = str(max_sessions)
    environment["BENCH_OPENENV_ON_LOOP"] = "0" if kind == "openenv-threads" else "1"
    server = subprocess.Popen(command, env=environment, stderr=log, start_new_session=True)
    return server, f"http://127.0.0.1:{port}"


START_TIMEOUT_S = 300.0
"""openenv-core imports gradio: about 20 s of CPU per worker process on a busy 2-core machine."""


def wait_until_idle(pid: int, quiet_cpu_s: float = 0.05, interval_s: float = 1.0) -> None:
    """Return once the server's processes used under ``quiet_cpu_s`` of CPU in ``interval_s``:
    every worker has started (``/health`` answers as soon as the first one serves)."""
    deadline, used = time.monotonic() + START_TIMEOUT_S, cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(interval_s)
        previous, used = used, cpu_seconds(pid)
        if used - previous < quiet_cpu_s:
            return
    raise RuntimeError(f"the server was still busy {START_TIMEOUT_S:.0f} s after it answered /health")


def stop_server(server: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then after 30 s SIGKILL to the server's process group (its workers)."""
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=30)


def measure(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    """One run of the load in ``args`` against the server ``kind``: the report's fields."""
    period = args.sessions / args.rate if args.rate > 0 else 0.0
    # --max-sessions is per worker, and one worker may accept most connections
    log = tempfile.TemporaryFile()
    server, base = start_server(kind, args.workers, args.sessions + 64, log)
    load_before = os.getloadavg()[0]
    try:
        context = multiprocessing.get_context("spawn")
        barrier = context.Barrier(args.clients + 1)
        results = context.Queue()
        url = base.replace("http://", "ws://") + WS_PATHS[kind]
        clients = [
            context.Process(
                target=client_process,
                args=(
                    args.client,
                    url,
                    [int(s) for s in share],
                    period,
                    barrier,
                    args.seconds,
                    results,
                    args.lockstep_resets,
                ),
            )
            for share in np.array_split(np.arange(args.sessions), args.clients)
        ]
        for client in clients:
            client.start()
        barrier.wait(timeout=600)  # every session open and reset: the window starts
        server_cpu = cpu_seconds(server.pid)
        time.sleep(args.seconds)
        server_cpu = cpu_seconds(server.pid) - server_cpu
        reports = [results.get(timeout=600) for _ in clients]
        for client in clients:
            client.join()
    finally:
        stop_server(server)
    log.seek(0)
    server_log = log.read().decode(errors="replace")
    log.close()
    steps = sum(r["steps"] for r in reports)
    window = max(r["elapsed"] for r in reports)
    latencies = np.concatenate([np.asarray(r["latencies"]) for r in reports]) * 1000
    steps_per_s = steps / window
    p50, p99 = float(np.percentile(latencies, 50)), float(np.percentile(latencies, 99))
    return {
        "server": kind,
        "mode": "open loop" if period else "closed loop",
        "offered_steps_per_s": args.rate or None,
        "sessions": args.sessions,
        "workers": args.workers,
        "client_processes": args.clients,
        "client": args.client,
        "lockstep_resets": args.lockstep_resets,
        "cores": os.cpu_count(),
        "load_average_1m_before": round(load_before, 1),
        "load_average_1m": round(os.getloadavg()[0], 1),
        "window_s": round(window, 1),
        "steps": steps,
        "resets": sum(r["resets"] for r in reports),
        "errors": sum(r["errors"] for r in reports),
        "failed_sessions": sum(len(r["failed_sessions"]) for r in reports),
        "first_session_failure": next((f for r in reports for f in r["failed_sessions"]), None),
        "late_sends": sum(r["late"] for r in reports),
        # openenv-core 0.3.0 logs an error with a traceback for every WebSocket its client closes
        "server_logged_errors": sum(line.startswith("ERROR:") for line in server_log.splitlines()),
        "steps_per_s": round(steps_per_s),
        "p50_ms": round(p50, 2),
        "p99_ms": round(p99, 2),
        "max_ms": round(float(latencies.max()), 2),
        "server_cores_used": round(server_cpu / window, 2),
        "client_cores_used": round(sum(r["cpu"] for r in reports) / window, 2),
        "server_cpu_us_per_step": round(server_cpu / max(1, steps) * 1e6, 1),
        "client_cpu_us_per_step": round(sum(r["cpu"] for r in reports) / max(1, steps) * 1e6, 1),
        "client_kernel_cpu_us_per_step": round(sum(r["system_cpu"] for r in reports) / max(1, steps) * 1e6, 1),
        "steps_per_s_vs_target_10000": round(steps_per_s / 10_000, 2),
        "p99_vs_target_20ms": round(p99 / 20, 2),
    }


ADOPT_WITHIN = 0.2
"""Issue 31's rule: adopt openenv-core's app where it is within 20 % of ace-gym serve on steps/s and p99."""


def comparison(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """Each other server's steps/s, p99 and server CPU per step as ratios to the first server's
    (the mean over rounds), and whether issue 31's 20 % rule holds for it."""
    by_server: dict[str, list[dict[str, Any]]] = {}
    for report in reports:
        by_server.setdefault(report["server"], []).append(report)

    def mean(kind: str, field: str) -> float:
        return float(np.mean([r[field] for r in by_server[kind]]))

    baseline, *others = by_server
    fields = ("steps_per_s", "p50_ms", "p99_ms", "server_cpu_us_per_step")
    result: dict[str, Any] = {"baseline": baseline, "rounds": len(by_server[baseline])}
    for kind in [baseline, *others]:
        result[kind] = {field: round(mean(kind, field), 2) for field in fields}
    for kind in others:
        ratios = {field: round(mean(kind, field) / max(mean(baseline, field), 1e-9), 3) for field in fields}
        within = ratios["steps_per_s"] >= 1 - ADOPT_WITHIN and ratios["p99_ms"] <= 1 + ADOPT_WITHIN
        result[f"{kind}_vs_{baseline}"] = {**ratios, "within_20_percent": within}
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=10_000, help="offered steps/s in all; 0 = closed loop")
    parser.add_argument("--workers", type=int, default=4, help="server worker processes")
    parser.add_argument("--clients", type=int, default=2, help="load-generator processes")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured window")
    parser.add_argument(
        "--lockstep-resets",
        action="store_true",
        help="every session's episodes 50 steps from the start (all sessions reset in the same 0.1 s)",
    )
    parser.add_argument("--client", choices=("raw", "aiohttp"), default="raw", help="load-generator WebSocket client")
    parser.add_argument(
        "--server",
        nargs="+",
        choices=SERVERS,
        default=["ace-gym"],
        help="servers measured in turn under the same load (openenv*: openenv-core's create_app; pip install openenv-core)",
    )
    parser.add_argument("--rounds", type=int, default=1, help="times the --server list is run, in turn")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a seconds-long smoke run: 20 sessions, 1 worker, 1 load generator, 400 steps/s, 2 s (overrides those flags)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.sessions, args.workers, args.clients, args.rate, args.seconds = 20, 1, 1, 400.0, 2.0

    reports = []
    for _ in range(args.rounds):
        for kind in args.server:
            reports.append(measure(kind, args))
            print(json.dumps(reports[-1]), flush=True)
    if len(args.server) > 1:
        print(json.dumps({"comparison": comparison(reports)}), flush=True)
    if not args.quick:
        print(json.dumps({"local_env_step_us": round(local_step_seconds() * 1e6, 2)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
