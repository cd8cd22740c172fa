"""``ace-gym demo``: a short scripted episode on each domain, printed step by step.

The script plays like a careful agent with full budgets: it lists each hidden slot's candidates,
fills the slot with a candidate that passes the slot check, and uses the global check to move
to another slot-valid candidate when the grid fails; then calls ``done``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ace_gym.domains import DOMAIN_NAMES
from ace_gym.envs import AceEnv


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("demo", help="play one scripted episode per domain and print the score")
    parser.add_argument("--domains", nargs="+", default=list(DOMAIN_NAMES), choices=DOMAIN_NAMES)
    parser.add_argument("--instance-id-suffix", default="h5_b4", help="which bundled instance to play, e.g. h5_b4")
    parser.set_defaults(handler=run)


def play(env: AceEnv, instance_id: str, echo: bool = True) -> tuple[float, int]:
    """Play one episode, printing a line per hidden slot when ``echo``; returns (score, tool calls)."""
    env.reset(options={"instance_id": instance_id})
    noun = env.domain.tool_noun
    steps = 0

    def call(name: str, **arguments: Any) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
        nonlocal steps
        observation, reward, terminated, truncated, info = env.step({"name": name, "arguments": arguments})
        steps += 1
        envelope = json.loads(observation)
        return envelope, reward, terminated or truncated, info

    valid: dict[tuple[int, int], list[str]] = {}
    for row, col in [(s.row, s.col) for s in env.compiled.slots]:
        listing, *_ = call(f"query_{noun}_candidate_from_attribute", row=row, col=col, field="name", operator="not_in", value=[])
        valid[(row, col)] = []
        for match in listing["data"]["matches"]:
            call("set_slot", row=row, col=col, id=match["id"])
            check, *_ = call(f"check_{noun}_slot_constraints", row=row, col=col)
            if check["data"]["is_valid"]:
                valid[(row, col)].append(match["id"])
        call("set_slot", row=row, col=col, id=valid[(row, col)][0])
        if echo:
            print(f"  slot ({row}, {col}): {len(listing['data']['matches'])} candidates, "
                  f"{len(valid[(row, col)])} pass the slot check")
    _search(call, noun, list(valid.items()))
    _, reward, _, info = call("done")
    if echo:
        print(f"  done: score={info['score']} reason={info['reason']}")
    return reward, steps


def _search(call: Any, noun: str, slots: list[tuple[tuple[int, int], list[str]]]) -> bool:
    """Depth-first over slot-valid candidates until the global check passes."""
    if not slots:
        check, *_ = call(f"check_{noun}_global_constraints")
        return bool(check["data"]["is_valid"])
    (row, col), options = slots[0]
    for item_id in options:
        call("set_slot", row=row, col=col, id=item_id)
        if _search(call, noun, slots[1:]):
            return True
    return False


def run(args: argparse.Namespace) -> int:
    total = 0.0
    for domain in args.domains:
        env = AceEnv(domain)
        instance_id = f"{domain}_r5_c5_{args.instance_id_suffix}"
        print(f"{domain}: {instance_id}")
        score, steps = play(env, instance_id)
        print(f"{domain}: score {score:.0f} in {steps} tool calls\n")
        total += score
    print(f"solved {total:.0f}/{len(args.domains)} domains")
    return 0
