"""Where the wall time of a batched rollout goes: the policy vs env + adapter.

Runs one batched rollout (``run_episodes``) with a policy — by default the transformers engine on
a tiny random Llama built locally — and splits its wall time, measured in the same run:

* generation: time inside ``engine.generate`` (timed around each call by a thin proxy);
* env + adapter: everything else (env reset and steps, parsing the turn, running the tools,
  rendering the replies, the collector's bookkeeping);
* of which env steps: the collector's own per-step timer (``usage.env_s``, summed over episodes).

Loading the datasets (once per process, cached) happens before the timed rollout and is printed
apart.

Target: env + adapter < 0.5 % of the wall time (the ACE paper reports 34-41 % environment shares
for WebArena and tau2-bench). A tiny model generates far faster than a real one, so the share
printed here is an upper bound of what a real model sees.

With a scripted policy (``--policy solver``) the policy's own time is ``usage.generation_s`` and
the baseline is the core env alone: the episodes' tool calls are replayed on bare ``AceEnv`` s
in the same run, so the ratio printed is what the rollout loop and the chat adapter cost on top
of the tools. Both are timed warm (after a first run has compiled every instance).

    python benchmarks/bench_rollout.py                      # tiny model, transformers engine
    python benchmarks/bench_rollout.py --policy vllm:PATH --engine-options '{"dtype": "float32"}'
    python benchmarks/bench_rollout.py --policy solver --episodes 210 --max-turns 1000
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from ace_gym.agents import ChatEngine, Completion, ScriptedPolicy
from ace_gym.agents.llm.tiny_model import build_tiny_model
from ace_gym.domains import DOMAIN_NAMES
from ace_gym.envs import AceEnv
from ace_gym.eval import EpisodeSpec, run_episodes
from ace_gym.instance import resolve_dataset
from ace_gym.policies import POLICY_SPECS, make_policy


class TimedEngine:
    """A ChatEngine proxy that adds up the wall time spent in ``generate``.

    With ``tool_calls=True`` the generated text is replaced (after timing) by a turn of three
    real tool calls in Hermes format — read the grid, check the global rules, read the query
    budget — so that the env does the work a working model's turn causes (a random model's text
    holds no call, which would flatter the env share).
    """

    def __init__(self, engine: ChatEngine, tool_calls: bool) -> None:
        self.engine = engine
        self.tool_calls = tool_calls
        self.generation_s = 0.0
        self.calls = 0

    def generate(
        self, conversations: Sequence[list[dict[str, Any]]], tools: Sequence[list[dict[str, Any]]]
    ) -> list[Completion]:
        began = time.perf_counter()
        completions = self.engine.generate(conversations, tools)
        self.generation_s += time.perf_counter() - began
        self.calls += 1
        if self.tool_calls:
            for completion, schemas in zip(completions, tools, strict=True):
                completion.text = _working_turn([schema["function"]["name"] for schema in schemas])
        return completions


def _working_turn(tool_names: list[str]) -> str:
    global_check = next(name for name in tool_names if name.endswith("_global_constraints"))
    calls = ["get_current_grid_state", global_check, "get_hidden_slot_query_budget"]
    return "".join(f'<tool_call>{{"name": "{name}", "arguments": {{}}}}</tool_call>' for name in calls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", help=f"{POLICY_SPECS} (default: hf: on a tiny local model)")
    parser.add_argument("--engine-options", type=json.loads, default={}, help="JSON object of engine options")
    parser.add_argument("--episodes", type=int, default=12)
    parser.add_argument("--max-turns", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument(
        "--model-actions",
        action="store_true",
        help="play the model's own text (default: three real tool calls per turn)",
    )
    args = parser.parse_args()

    if args.policy:
        policy = make_policy(args.policy, **args.engine_options)
    else:
        model = build_tiny_model(f"{tempfile.mkdtemp(prefix='ace-bench-')}/tiny-model")
        policy = make_policy(f"hf:{model}", max_new_tokens=args.max_new_tokens, batch_size=args.episodes)
    sizes = {domain: len(resolve_dataset("5x5", domain)) for domain in DOMAIN_NAMES}
    specs = [
        EpisodeSpec.of(domain, instance_index=k // len(DOMAIN_NAMES) % sizes[domain], seed=k, max_turns=args.max_turns)
        for k in range(args.episodes)
        for domain in [DOMAIN_NAMES[k % len(DOMAIN_NAMES)]]
    ]
    began = time.perf_counter()
    for spec in specs:  # datasets load once per process: time that apart from the rollout
        spec.stack.below("chat_adapter").make().close()
    load_s = time.perf_counter() - began
    if isinstance(policy, ScriptedPolicy):
        _scripted(specs, policy, load_s)
    else:
        _chat(specs, TimedEngine(policy, tool_calls=not args.model_actions), args.episodes, load_s)


def _chat(specs: list[EpisodeSpec], engine: TimedEngine, batch_size: int, load_s: float) -> None:
    began = time.perf_counter()
    records = list(run_episodes(specs, engine, batch_size=batch_size))
    wall_s = time.perf_counter() - began

    turns = sum(r["usage"]["turns"] for r in records)
    env_steps_s = sum(r["usage"]["env_s"] for r in records)
    rest_s = wall_s - engine.generation_s
    tool_calls = sum(r["usage"]["tool_calls"] for r in records)
    print(
        f"{len(records)} episodes, {turns} turns ({tool_calls} tool calls) in {engine.calls} batched generate calls, "
        f"wall {wall_s:.2f} s (dataset loading before it, once per process: {load_s:.2f} s)"
    )
    print(f"  generation      {engine.generation_s:9.3f} s  {100 * engine.generation_s / wall_s:7.3f} %")
    print(
        f"  env + adapter   {rest_s:9.3f} s  {100 * rest_s / wall_s:7.3f} %   (target < 0.5 %, {1e6 * rest_s / turns:.0f} µs per turn)"
    )
    print(
        f"    env steps     {env_steps_s:9.3f} s  {100 * env_steps_s / wall_s:7.3f} %   ({1e6 * env_steps_s / turns:.0f} µs per turn)"
    )


def _scripted(specs: list[EpisodeSpec], policy: ScriptedPolicy, load_s: float) -> None:
    began = time.perf_counter()
    list(run_episodes(specs, policy, batch_size=1))  # compiles each instance once (cached): untimed
    compile_s = time.perf_counter() - began
    began = time.perf_counter()
    records = list(run_episodes(specs, policy, batch_size=1))
    wall_s = time.perf_counter() - began
    turns = sum(r["usage"]["turns"] for r in records)
    policy_s = sum(r["usage"]["generation_s"] for r in records)
    rest_s = wall_s - policy_s
    core_s = _replay_on_core_envs(specs, records)
    print(
        f"{len(records)} episodes, {turns} turns of {policy.name}, wall {wall_s:.3f} s (before it, once per "
        f"process: dataset loading {load_s:.2f} s, a first run compiling the instances {compile_s:.2f} s)"
    )
    print(f"  policy          {policy_s:9.3f} s  {100 * policy_s / wall_s:7.3f} %")
    print(
        f"  env + adapter   {rest_s:9.3f} s  {100 * rest_s / wall_s:7.3f} %   ({1e6 * rest_s / turns:.1f} µs per turn)"
    )
    print(f"  baseline: the same calls on bare core envs {core_s:.3f} s ({1e6 * core_s / turns:.1f} µs per call)")
    print(
        f"  env + adapter / core env alone: {rest_s / core_s:.2f}x  ({1e6 * (rest_s - core_s) / turns:.1f} µs per turn on top)"
    )


def _replay_on_core_envs(specs: list[EpisodeSpec], records: list[dict[str, Any]]) -> float:
    """Wall time of resetting bare core envs and stepping them with the records' tool calls."""
    by_key = {record["key"]: record for record in records}
    calls = []
    for spec in specs:
        record = by_key[spec.key(records[0]["policy"])]
        messages = [m for m in record["messages"] if m["role"] == "assistant"]
        calls.append(
            [
                {"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])}
                for m in messages
                for c in m["tool_calls"]
            ]
        )
    return core_env_time(specs, calls)


def core_env_time(specs: list[EpisodeSpec], calls: list[list[dict[str, Any]]]) -> float:
    """Wall time of resetting bare core envs and stepping each with its episode's ``calls``."""
    began = time.perf_counter()
    for spec, episode_calls in zip(specs, calls, strict=True):
        env = AceEnv(**spec.stack.env_kwargs)
        env.reset(seed=spec.seed, options=spec.reset_options())
        for call in episode_calls:
            env.step(call)
        env.close()
    return time.perf_counter() - began


if __name__ == "__main__":
    main()
