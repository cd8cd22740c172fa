"""Cost of one chat turn through ChatAdapter, next to a bare parse of the same text.

    python benchmarks/bench_adapter.py [--turns N] [--repeats R]

For each turn shape (one call, three calls, with and without a think block, several formats) it
measures, in this process and this run, µs per turn (best of R interleaved rounds of N turns):

* ``parse``: ``parse_turn(text)`` alone (the bare parse);
* ``env``: the same tool calls stepped directly on the bare ``AceEnv`` (the tools' own cost);
* ``turn``: ``ChatAdapter.step(text)``: parse + the env steps + building the assistant message,
  the OpenAI tool messages and the info (the render).

Target (issue 4): ``turn`` <= 2 x ``parse``. The adapter's own overhead
(``turn - parse - env``) is printed too. Episodes are reset every 40 turns so the history stays
the size of a real episode.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from ace_gym.envs import AceEnv
from ace_gym.parsing import parse_turn
from ace_gym.wrappers import ChatAdapter

EPISODE_TURNS = 40
THINK = "<think>\nThe slot (1, 0) is hidden; I should check its id before querying candidates.\n</think>\n\n"


def _hermes(calls: list[tuple[str, dict]]) -> str:
    return "\n".join(f"<tool_call>\n{json.dumps({'name': n, 'arguments': a})}\n</tool_call>" for n, a in calls)


def _xml(calls: list[tuple[str, dict]]) -> str:
    blocks = []
    for name, arguments in calls:
        parameters = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in arguments.items())
        blocks.append(f"<tool_call>\n<function={name}>\n{parameters}</function>\n</tool_call>")
    return "\n".join(blocks)


def _pythonic(calls: list[tuple[str, dict]]) -> str:
    return "[" + ", ".join(f"{n}({', '.join(f'{k}={v!r}' for k, v in a.items())})" for n, a in calls) + "]"


ONE = [("get_slot_id", {"row": 1, "col": 0})]
THREE = [
    ("get_slot_id", {"row": 1, "col": 0}),
    ("get_hidden_slot_query_budget", {"row": 1, "col": 0}),
    ("query_course_candidate_from_attribute", {"row": 1, "col": 0, "field": "credits", "operator": ">=", "value": 3}),
]
SHAPES: list[tuple[str, list[tuple[str, dict]], str]] = [
    ("hermes, 1 call", ONE, _hermes(ONE)),
    ("hermes, think + 1 call", ONE, THINK + "Checking the slot.\n" + _hermes(ONE)),
    ("hermes, think + 3 calls", THREE, THINK + _hermes(THREE)),
    ("qwen3 xml, 3 calls", THREE, _xml(THREE)),
    ("pythonic, 3 calls", THREE, _pythonic(THREE)),
    ("openai message, 1 call", ONE, ""),
]
OPENAI_MESSAGE = {
    "role": "assistant",
    "content": "",
    "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_slot_id", "arguments": '{"row": 1, "col": 0}'}}
    ],
}


def _chunk_us(turn: Callable[[], object], reset: Callable[[], object], turns: int) -> float:
    """µs per ``turn()`` over ``turns`` turns, resetting every EPISODE_TURNS turns (untimed)."""
    elapsed = 0.0
    for _ in range(0, turns, EPISODE_TURNS):
        reset()
        started = time.perf_counter()
        for _ in range(EPISODE_TURNS):
            turn()
        elapsed += time.perf_counter() - started
    return elapsed / turns * 1e6


def _interleaved_us(
    candidates: list[tuple[Callable[[], object], Callable[[], object]]], turns: int, repeats: int
) -> list[float]:
    """Per candidate, the best of ``repeats`` rounds; each round times every candidate back to back,
    so that load from other processes hits them alike (the minimum is the least disturbed run)."""
    samples: list[list[float]] = [[] for _ in candidates]
    for _ in range(repeats):
        for sample, (turn, reset) in zip(samples, candidates, strict=True):
            sample.append(_chunk_us(turn, reset, turns))
    return [min(sample) for sample in samples]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=400, help="turns per timed round")
    parser.add_argument("--repeats", type=int, default=25, help="interleaved rounds (best one kept)")
    args = parser.parse_args()

    options = {"instance_index": 18}
    adapter = ChatAdapter(AceEnv("course", max_steps=10**9))
    bare = AceEnv("course", max_steps=10**9)
    print(
        f"µs per turn, best of {args.repeats} interleaved rounds of {args.turns} turns"
        f" (course, instance 18, episodes of {EPISODE_TURNS} turns, resets untimed)"
    )
    print(f"{'turn shape':<26} {'parse':>7} {'env':>7} {'turn':>7} {'overhead':>9} {'turn/parse':>11}  target <= 2.0")
    for label, calls, text in SHAPES:
        action = OPENAI_MESSAGE if label.startswith("openai") else text
        if len(parse_turn(action).calls) != len(calls):
            raise SystemExit(f"the {label!r} text does not parse into its {len(calls)} calls")

        actions = [{"name": n, "arguments": a} for n, a in calls]

        def bare_steps(actions=actions) -> None:
            for step_action in actions:
                bare.step(step_action)

        parse_us, env_us, turn_us = _interleaved_us(
            [
                (lambda action=action: parse_turn(action), lambda: None),
                (bare_steps, lambda: bare.reset(options=options)),
                (lambda action=action: adapter.step(action), lambda: adapter.reset(options=options)),
            ],
            args.turns,
            args.repeats,
        )
        ratio = turn_us / parse_us
        verdict = "ok" if ratio <= 2.0 else "MISSED"
        print(
            f"{label:<26} {parse_us:7.2f} {env_us:7.2f} {turn_us:7.2f} {turn_us - parse_us - env_us:9.2f} {ratio:11.2f}  {verdict}"
        )


if __name__ == "__main__":
    main()
