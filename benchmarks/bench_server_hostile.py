"""The env server under a barrage of hostile requests: it keeps answering, never with a 500, and
its sessions and memory come back to their baseline.

Starts ``ace-gym serve`` (one worker, a small session cap and a short idle timeout) and sends N
requests drawn from a seeded mix: bodies that are not JSON or nested 50,000 deep, bodies over the
size limit, unknown and forged session ids, garbage actions on live sessions, sessions opened and
never closed, refused make and reset arguments, unknown env ids, wrong methods, raw bytes that are
not HTTP, garbage WebSocket frames and WebSocket clients that vanish mid-episode. Then it checks
``/health``, waits for the idle timeout and reads the session count and the server's resident
memory again. Prints one JSON line; exits 1 if a check failed.

    python benchmarks/bench_server_hostile.py                   # 10^5 requests
    python benchmarks/bench_server_hostile.py --count 10000     # what the test suite runs
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import websockets
from bench_server import start_ace_gym, stop_server  # this folder: run as python benchmarks/bench_server_hostile.py

MAX_BODY = 1 << 16
IDLE_TIMEOUT_S = 2.0
MAX_SESSIONS = 128
KINDS = {  # kind: weight
    "bad_json": 10,
    "deep_json": 3,
    "big_body": 1,
    "unknown_session": 10,
    "garbage_action": 25,
    "open_session": 5,
    "bad_make": 5,
    "bad_reset": 5,
    "unknown_env": 5,
    "wrong_method": 5,
    "raw_junk": 2,
    "ws_garbage": 20,
    "ws_abandon": 4,
}
QUERY = {"name": "get_current_grid_state", "arguments": {}}


def random_json(rng: np.random.Generator, depth: int = 0) -> Any:
    """A random JSON value: nested containers, odd strings (escaped lone surrogates), big numbers."""
    pick = int(rng.integers(9 if depth < 4 else 5))
    if pick == 0:
        return None
    if pick == 1:
        return bool(rng.integers(2))
    if pick == 2:
        return int(rng.integers(-(2**62), 2**62)) * int(rng.choice([1, 10**30]))
    if pick == 3:
        return float(rng.normal() * 10 ** int(rng.integers(-300, 300)))
    if pick == 4:
        return "".join(chr(int(c)) for c in rng.integers(0, 0x2FFFF, size=int(rng.integers(0, 40))))
    if pick in (5, 6):
        return [random_json(rng, depth + 1) for _ in range(int(rng.integers(0, 5)))]
    keys = ["name", "arguments", "row", "col", "id", "field", "value", "operator", "\ud800", "type", "data"]
    return {str(rng.choice(keys)): random_json(rng, depth + 1) for _ in range(int(rng.integers(0, 5)))}


def encode(value: Any) -> bytes:
    """JSON bytes, lone surrogates escaped (as a hostile client would send them)."""
    return json.dumps(value).encode()


class Barrage:
    def __init__(self, url: str, seed: int, concurrency: int) -> None:
        self.url, self.rng, self.concurrency = url, np.random.default_rng(seed), concurrency
        self.results: collections.Counter[str] = collections.Counter()
        self.failures: list[str] = []
        self.sessions: list[str] = []
        self.kinds = list(KINDS)
        weights = np.array(list(KINDS.values()), dtype=float)
        self.weights = weights / weights.sum()

    def record(self, kind: str, status: int, body: bytes) -> None:
        """Count a reply; a 5xx other than a full server (503 CAPACITY_REACHED) is a failure."""
        self.results[f"{status}"] += 1
        if status >= 500 and not (status == 503 and b'"code":"CAPACITY_REACHED"' in body):
            self.failures.append(f"{kind}: {status} {body[:200]!r}")

    async def run(self, count: int) -> None:
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
        async with httpx.AsyncClient(base_url=self.url, limits=limits, timeout=60) as client:
            queue: asyncio.Queue[str] = asyncio.Queue()
            for kind in self.rng.choice(self.kinds, size=count, p=self.weights):
                queue.put_nowait(str(kind))
            await asyncio.gather(*(self.worker(client, queue) for _ in range(self.concurrency)))

    async def worker(self, client: httpx.AsyncClient, queue: asyncio.Queue[str]) -> None:
        while not queue.empty():
            kind = queue.get_nowait()
            try:
                await getattr(self, kind)(client)
            except (httpx.TransportError, OSError, websockets.exceptions.WebSocketException) as error:
                self.results[f"transport:{type(error).__name__}"] += 1

    async def post(self, client: httpx.AsyncClient, kind: str, path: str, body: bytes) -> httpx.Response:
        reply = await client.post(path, content=body, headers={"content-type": "application/json"})
        self.record(kind, reply.status_code, reply.content)
        return reply

    async def live_session(self, client: httpx.AsyncClient) -> str | None:
        if len(self.sessions) < 8:
            reply = await self.post(client, "open_session", "/reset", b"{}")
            if reply.status_code == 200:
                self.sessions.append(reply.json()["session_id"])
        return self.sessions[int(self.rng.integers(len(self.sessions)))] if self.sessions else None

    # -- the kinds -------------------------------------------------------------------------------

    async def bad_json(self, client: httpx.AsyncClient) -> None:
        path = str(self.rng.choice(["/step", "/reset", "/make", "/close"]))
        await self.post(client, "bad_json", path, self.rng.bytes(int(self.rng.integers(0, 300))))

    async def deep_json(self, client: httpx.AsyncClient) -> None:
        await self.post(client, "deep_json", "/step", b'{"action": ' + b"[" * 50_000 + b"]" * 50_000 + b"}")

    async def big_body(self, client: httpx.AsyncClient) -> None:
        await self.post(client, "big_body", "/step", b'{"action": "' + b"x" * MAX_BODY + b'"}')

    async def unknown_session(self, client: httpx.AsyncClient) -> None:
        session_id = (
            random_json(self.rng) if self.rng.random() < 0.5 else f"{self.rng.integers(0, 9)}-{self.rng.bytes(8).hex()}"
        )
        await self.post(client, "unknown_session", "/step", encode({"action": QUERY, "session_id": session_id}))

    async def garbage_action(self, client: httpx.AsyncClient) -> None:
        session_id = await self.live_session(client)
        if session_id is None:
            return
        reply = await self.post(
            client, "garbage_action", "/step", encode({"action": random_json(self.rng), "session_id": session_id})
        )
        if reply.status_code == 404 and session_id in self.sessions:  # evicted
            self.sessions.remove(session_id)
        elif reply.status_code == 200 and reply.json()["done"]:
            await self.post(client, "garbage_action", "/reset", encode({"session_id": session_id}))

    async def open_session(self, client: httpx.AsyncClient) -> None:
        await self.post(client, "open_session", "/reset", encode({"seed": int(self.rng.integers(1000))}))

    async def bad_make(self, client: httpx.AsyncClient) -> None:
        body = {
            "kwargs": random_json(self.rng),
            "wrappers": [
                {
                    "name": str(self.rng.choice(["ChatAdapter", "os.system", "StepBudget"])),
                    "kwargs": random_json(self.rng),
                }
            ],
        }
        if self.rng.random() < 0.5:
            body = {
                "kwargs": {
                    str(self.rng.choice(["dataset", "max_steps", "domain", "render_mode"])): random_json(self.rng)
                }
            }
        await self.post(client, "bad_make", "/make", encode(body))

    async def bad_reset(self, client: httpx.AsyncClient) -> None:
        session_id = await self.live_session(client)
        body = {"session_id": session_id, "seed": random_json(self.rng), "options": random_json(self.rng)}
        await self.post(client, "bad_reset", "/reset", encode(body))

    async def unknown_env(self, client: httpx.AsyncClient) -> None:
        env_id = str(self.rng.choice(["ACE-nope-v0", "..%2F..%2Fetc", "ACE-course-v0%00", "x" * 500]))
        await self.post(client, "unknown_env", f"/envs/{env_id}/reset", b"{}")

    async def wrong_method(self, client: httpx.AsyncClient) -> None:
        method, path = (
            str(self.rng.choice(["GET", "PUT", "DELETE"])),
            str(self.rng.choice(["/step", "/reset", "/nope"])),
        )
        reply = await client.request(method, path)
        self.record("wrong_method", reply.status_code, reply.content)

    async def raw_junk(self, client: httpx.AsyncClient) -> None:
        host, port = self.url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(self.rng.bytes(int(self.rng.integers(1, 2000))) + b"\r\n\r\n")
        await writer.drain()
        await asyncio.wait_for(reader.read(1000), timeout=10)
        writer.close()
        self.results["raw_junk"] += 1

    async def ws_garbage(self, client: httpx.AsyncClient) -> None:
        async with websockets.connect(self.url.replace("http://", "ws://") + "/ws", max_size=None) as connection:
            for _ in range(5):
                pick = self.rng.random()
                if pick < 0.4:
                    frame: Any = self.rng.bytes(int(self.rng.integers(0, 200)))
                elif pick < 0.6:
                    frame = json.dumps(
                        {
                            "type": str(self.rng.choice(["reset", "step", "state", "make", "x"])),
                            "data": random_json(self.rng),
                        }
                    )
                else:
                    frame = json.dumps({"type": "step", "data": random_json(self.rng)})
                await connection.send(frame)
                reply = json.loads(await connection.recv())
                self.results[f"ws:{reply['type']}"] += 1
                if reply["type"] == "error" and reply["data"]["code"] in ("EXECUTION_ERROR", "CAPACITY_REACHED"):
                    if reply["data"]["code"] == "EXECUTION_ERROR":
                        self.failures.append(f"ws_garbage: {reply}")
                    return

    async def ws_abandon(self, client: httpx.AsyncClient) -> None:
        connection = await websockets.connect(self.url.replace("http://", "ws://") + "/ws")
        await connection.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
        await connection.recv()
        connection.transport.abort()  # vanish without a close frame
        self.results["ws:abandoned"] += 1


def resident_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def health(url: str) -> dict[str, Any]:
    return httpx.get(f"{url}/health", timeout=30).json()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    server, url = start_ace_gym(
        "--env",
        "ACE-course-v0",  # the root endpoints serve it (a server of several ids would refuse them)
        "--log-level",
        "critical",
        "--max-sessions",
        str(MAX_SESSIONS),
        "--idle-timeout",
        str(IDLE_TIMEOUT_S),
        "--max-body-bytes",
        str(MAX_BODY),
    )
    try:
        asyncio.run(Barrage(url, args.seed + 1, args.concurrency).run(200))  # warm up: caches, first sessions
        time.sleep(IDLE_TIMEOUT_S * 2)
        baseline_sessions, baseline_mb = health(url)["sessions"], resident_mb(server.pid)
        barrage = Barrage(url, args.seed, args.concurrency)
        began = time.perf_counter()
        asyncio.run(barrage.run(args.count))
        seconds = time.perf_counter() - began
        after_barrage = health(url)
        time.sleep(IDLE_TIMEOUT_S * 2.5)
        after_idle = health(url)
        report = {
            "requests": args.count,
            "seconds": round(seconds, 1),
            "requests_per_s": round(args.count / seconds),
            "results": dict(sorted(barrage.results.items())),
            "failures": barrage.failures[:20],
            "failure_count": len(barrage.failures),
            "sessions_baseline": baseline_sessions,
            "sessions_after_barrage": after_barrage["sessions"],
            "sessions_after_idle_timeout": after_idle["sessions"],
            "max_sessions": after_idle["max_sessions"],
            "rss_mb_baseline": round(baseline_mb, 1),
            "rss_mb_after": round(resident_mb(server.pid), 1),
            "server_alive": server.poll() is None,
        }
    finally:
        stop_server(server)
    print(json.dumps(report))
    ok = (
        report["failure_count"] == 0
        and report["server_alive"]
        and report["sessions_after_idle_timeout"] == report["sessions_baseline"]
        and report["sessions_after_barrage"] <= report["max_sessions"]
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
