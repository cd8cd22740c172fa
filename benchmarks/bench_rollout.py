"""Where the wall time of a batched LLM rollout goes: model generation vs env + adapter.

Runs one batched rollout (``run_episodes``) with a chat engine — by default the transformers
engine on a tiny random Llama built locally — and splits its wall time, measured in the same run:

* generation: time inside ``engine.generate`` (timed around each call by a thin proxy);
* env + adapter: everything else (env reset and steps, parsing the turn, running the tools,
  rendering the replies, the collector's bookkeeping);
* of which env steps: the collector's own per-step timer (``usage.env_s``, summed over episodes).

Target: env + adapter < 0.5 % of the wall time (the ACE paper reports 34-41 % environment shares
for WebArena and tau2-bench). A tiny model generates far faster than a real one, so the share
printed here is an upper bound of what a real model sees.

    python benchmarks/bench_rollout.py                      # tiny model, transformers engine
    python benchmarks/bench_rollout.py --engine vllm:PATH   # any make_engine spec
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from ace_gym.agents.base import ChatEngine, Completion
from ace_gym.agents.llm import make_engine
from ace_gym.agents.llm.tiny_model import build_tiny_model
from ace_gym.domains import DOMAIN_NAMES
from ace_gym.eval import EpisodeSpec, run_episodes


class TimedEngine:
    """A ChatEngine proxy that adds up the wall time spent in ``generate``."""

    def __init__(self, engine: ChatEngine) -> None:
        self.engine = engine
        self.generation_s = 0.0
        self.calls = 0

    def generate(
        self, conversations: Sequence[list[dict[str, Any]]], tools: Sequence[list[dict[str, Any]]]
    ) -> list[Completion]:
        began = time.perf_counter()
        completions = self.engine.generate(conversations, tools)
        self.generation_s += time.perf_counter() - began
        self.calls += 1
        return completions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", help="make_engine spec (default: hf: on a tiny local model)")
    parser.add_argument("--episodes", type=int, default=12)
    parser.add_argument("--max-turns", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    args = parser.parse_args()

    if args.engine:
        engine = TimedEngine(make_engine(args.engine))
    else:
        model = build_tiny_model(f"{tempfile.mkdtemp(prefix='ace-bench-')}/tiny-model")
        engine = TimedEngine(make_engine(f"hf:{model}", max_new_tokens=args.max_new_tokens, batch_size=args.episodes))
    specs = [
        EpisodeSpec(DOMAIN_NAMES[k % len(DOMAIN_NAMES)], instance_index=k, seed=k, max_turns=args.max_turns)
        for k in range(args.episodes)
    ]
    began = time.perf_counter()
    records = list(run_episodes(specs, engine, batch_size=args.episodes))
    wall_s = time.perf_counter() - began

    turns = sum(r["usage"]["turns"] for r in records)
    env_steps_s = sum(r["usage"]["env_s"] for r in records)
    rest_s = wall_s - engine.generation_s
    print(f"{len(records)} episodes, {turns} turns in {engine.calls} batched generate calls, wall {wall_s:.2f} s")
    print(f"  generation      {engine.generation_s:9.3f} s  {100 * engine.generation_s / wall_s:7.3f} %")
    print(f"  env + adapter   {rest_s:9.3f} s  {100 * rest_s / wall_s:7.3f} %   (target < 0.5 %)")
    print(
        f"    env steps     {env_steps_s:9.3f} s  {100 * env_steps_s / wall_s:7.3f} %   ({1e6 * env_steps_s / turns:.0f} µs per turn)"
    )


if __name__ == "__main__":
    main()
