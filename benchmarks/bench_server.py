"""Env server load: 1,000 concurrent WebSocket sessions on one machine (loopback), steps/s and
per-step latency.

Starts ``ace-gym serve --workers W`` and P load-generator processes; each process multiplexes its
share of the sessions on one asyncio loop (closed loop: a session sends its next step when the
previous reply arrived). Every session resets with its own seed, then plays a cycle of four tool
calls (attribute query, item info, slot check, grid state) and resets again every 50 steps
(resets are counted apart). After all sessions are open and reset, steps are counted for
``--seconds``; latency is measured per step at the client (send to reply parsed).

Target (issue 15): >= 10,000 steps/s and p99 < 20 ms with 4 workers on 2 cores. The load
generator shares the machine's cores with the server, so on a 2-core machine it takes part of the
CPU the target assumes for the server; the printed CPU split says how much.

    python benchmarks/bench_server.py                            # 1000 sessions, 4 workers, 2 clients
    python benchmarks/bench_server.py --sessions 200 --workers 1 --seconds 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
STEPS_PER_EPISODE = 50
ACTIONS = [
    {"name": "query_course_candidate_from_attribute", "arguments": {"row": 2, "col": 3, "field": "price", "operator": "<=", "value": 300}},
    {"name": "get_course_item_info", "arguments": {"id": "C1843"}},
    {"name": "check_course_slot_constraints", "arguments": {"row": 0, "col": 0}},
    {"name": "get_current_grid_state", "arguments": {}},
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its children so far (Linux /proc)."""
    total = 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    pids = [pid, *(int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split())]
    for each in pids:
        fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total


async def _session(url: str, seed: int, ready: asyncio.Event, start: asyncio.Event, stop: asyncio.Event, out: dict[str, Any]) -> None:
    import websockets

    step_frames = [json.dumps({"type": "step", "data": action}) for action in ACTIONS]
    async with websockets.connect(url, max_size=None, compression=None) as connection:
        async def call(text: str) -> dict[str, Any]:
            await connection.send(text)
            return json.loads(await connection.recv())

        await call(json.dumps({"type": "reset", "data": {"seed": seed}}))
        out["ready"] += 1
        if out["ready"] == out["sessions"]:
            ready.set()
        await start.wait()
        steps = 0
        while not stop.is_set():
            began = time.perf_counter()
            reply = await call(step_frames[steps % len(step_frames)])
            out["latencies"].append(time.perf_counter() - began)
            if reply["type"] != "observation":
                out["errors"] += 1
            steps += 1
            if steps % STEPS_PER_EPISODE == 0 or reply["data"].get("done"):
                await call(json.dumps({"type": "reset", "data": {"seed": seed + steps}}))
                out["resets"] += 1


def _client_process(url: str, seeds: list[int], barrier: Any, seconds: float, results: Any) -> None:
    """One load-generator process: its sessions on one event loop."""
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass

    async def run() -> dict[str, Any]:
        ready, start, stop = asyncio.Event(), asyncio.Event(), asyncio.Event()
        out: dict[str, Any] = {"ready": 0, "sessions": len(seeds), "latencies": [], "errors": 0, "resets": 0}
        tasks = [asyncio.create_task(_session(url, seed, ready, start, stop, out)) for seed in seeds]
        await ready.wait()
        await asyncio.get_running_loop().run_in_executor(None, barrier.wait)  # every process ready
        out["latencies"].clear()
        start.set()
        began, cpu = time.perf_counter(), time.process_time()
        await asyncio.sleep(seconds)
        stop.set()
        elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu
        steps = len(out["latencies"])  # steps finished inside the window
        await asyncio.gather(*tasks)
        return {
            "steps": steps,
            "elapsed": elapsed,
            "cpu": cpu,
            "latencies": out["latencies"][:steps],
            "errors": out["errors"],
            "resets": out["resets"],
        }

    results.put(asyncio.run(run()))


def local_step_seconds() -> float:
    """Seconds per ``env.step`` of the same action cycle in this process (no server)."""
    import gymnasium as gym

    import ace_gym  # noqa: F401  (registers the ids)

    env = gym.make("ACE-course-v0", disable_env_checker=True)
    env.reset(seed=0)
    count = 20_000
    began = time.perf_counter()
    for n in range(count):
        if n % STEPS_PER_EPISODE == 0:
            env.reset(seed=n)
        env.step(ACTIONS[n % len(ACTIONS)])
    return (time.perf_counter() - began) / count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=4, help="server worker processes")
    parser.add_argument("--clients", type=int, default=2, help="load-generator processes")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured window")
    args = parser.parse_args(argv)

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "ace_gym", "serve", "--port", str(port), "--workers", str(args.workers)]
    command += ["--max-sessions", str(args.sessions + 64), "--log-level", "warning"]
    server = subprocess.Popen(command, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{base}/health", timeout=1)
                break
            except httpx.TransportError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("ace-gym serve did not start") from None
                time.sleep(0.2)
        context = multiprocessing.get_context("spawn")
        barrier = context.Barrier(args.clients + 1)
        results = context.Queue()
        url = base.replace("http://", "ws://") + "/envs/ACE-course-v0/ws"
        shares = np.array_split(np.arange(args.sessions), args.clients)
        clients = [
            context.Process(target=_client_process, args=(url, [int(s) for s in share], barrier, args.seconds, results))
            for share in shares
        ]
        for client in clients:
            client.start()
        barrier.wait(timeout=300)  # every session open and reset: the window starts
        server_cpu = cpu_seconds(server.pid)
        time.sleep(args.seconds)
        server_cpu = cpu_seconds(server.pid) - server_cpu
        reports = [results.get(timeout=300) for _ in clients]
        for client in clients:
            client.join()
    finally:
        server.terminate()
        server.wait(timeout=30)
    client_cpu = sum(r["cpu"] for r in reports)
    latencies = np.concatenate([np.asarray(r["latencies"]) for r in reports]) * 1000
    window = max(r["elapsed"] for r in reports)
    steps_per_s = sum(r["steps"] for r in reports) / window
    local = local_step_seconds()
    p50, p99 = float(np.percentile(latencies, 50)), float(np.percentile(latencies, 99))
    report = {
        "sessions": args.sessions,
        "workers": args.workers,
        "client_processes": args.clients,
        "cores": os.cpu_count(),
        "load_average_1m": os.getloadavg()[0],
        "window_s": round(window, 1),
        "steps": int(sum(r["steps"] for r in reports)),
        "resets": int(sum(r["resets"] for r in reports)),
        "errors": int(sum(r["errors"] for r in reports)),
        "steps_per_s": round(steps_per_s),
        "p50_ms": round(p50, 2),
        "p99_ms": round(p99, 2),
        "server_cpu_s": round(server_cpu, 1),
        "server_cores_used": round(server_cpu / window, 2),
        "server_cpu_us_per_step": round(server_cpu / max(1, sum(r["steps"] for r in reports)) * 1e6, 1),
        "client_cores_used": round(client_cpu / window, 2),
        "local_env_step_us": round(local * 1e6, 2),
        "steps_per_s_vs_target_10000": round(steps_per_s / 10_000, 2),
        "p99_vs_target_20ms": round(p99 / 20, 2),
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
