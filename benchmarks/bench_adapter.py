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

Every turn of a shape makes the same calls, so from an episode's second turn on they read the
replies the instance stored for the process (``ace_gym.tools.replies``), and a query, once its
budget is spent, gets the refusal. ``env`` and ``turn`` are therefore timed twice: on one
instance for the whole run ("repeat": from the first episode on, every reply is stored) and with
every episode on an instance freshly read ("first": its stores empty when the episode starts, its
item dicts built untimed, as in ``bench_tools.py``; its later turns still read what its first
stored), with a verdict for each. The untimed fresh read before each "first" episode also evicts
the interpreter's code and data from the CPU caches, which the next turns pay while they warm up
again; so that the "first" ratio compares like with like, its bare parse ("parse 1st") is timed
after the same untimed read.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from functools import partial

from ace_gym.envs import AceEnv, DatasetSource
from ace_gym.instance import bundled_dataset_path, read_dataset
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
    first = _FirstUse(options)
    print(
        f"µs per turn, best of {args.repeats} interleaved rounds of {args.turns} turns"
        f" (course, instance 18, episodes of {EPISODE_TURNS} turns, resets untimed);"
    )
    print("repeat = one instance for the whole run (every reply stored); 1st = each episode on an instance")
    print("freshly read (its stores empty at the episode's start; the parse timed after the same untimed read)")
    print(
        f"{'turn shape':<26} {'parse':>7} {'parse 1st':>9} {'env':>7} {'env 1st':>8} {'turn':>7} {'turn 1st':>9}"
        f" {'overhead':>9}"
        f" {'turn/parse':>11} {'1st':>5}  target <= 2.0 (repeat, 1st)"
    )
    for label, calls, text in SHAPES:
        action = OPENAI_MESSAGE if label.startswith("openai") else text
        if len(parse_turn(action).calls) != len(calls):
            raise SystemExit(f"the {label!r} text does not parse into its {len(calls)} calls")

        actions = [{"name": n, "arguments": a} for n, a in calls]

        def bare_steps(env: Callable[[], AceEnv], actions: list[dict[str, object]] = actions) -> None:
            step = env().step
            for step_action in actions:
                step(step_action)

        # each repeat candidate runs after the one it ran after before the parse 1st column came
        parse_us, env_us, env_first_us, turn_us, parse_first_us, turn_first_us = _interleaved_us(
            [
                (lambda action=action: parse_turn(action), lambda: None),
                (partial(bare_steps, lambda: bare), lambda: bare.reset(options=options)),
                (partial(bare_steps, lambda: first.bare), first.reset_bare),
                (lambda action=action: adapter.step(action), lambda: adapter.reset(options=options)),
                (lambda action=action: parse_turn(action), first.reset_unused),
                (lambda action=action: first.adapter.step(action), first.reset_adapter),
            ],
            args.turns,
            args.repeats,
        )
        ratio, first_ratio = turn_us / parse_us, turn_first_us / parse_first_us
        verdicts = ", ".join("ok" if r <= 2.0 else "MISSED" for r in (ratio, first_ratio))
        print(
            f"{label:<26} {parse_us:7.2f} {parse_first_us:9.2f} {env_us:7.2f} {env_first_us:8.2f} {turn_us:7.2f}"
            f" {turn_first_us:9.2f}"
            f" {turn_us - parse_us - env_us:9.2f} {ratio:11.2f} {first_ratio:5.2f}  {verdicts}"
        )


class _FirstUse:
    """A bare env and a ChatAdapter whose resets start each episode on an instance freshly read
    from the dataset (nothing stored for it; its item dicts built), as the first episode on it."""

    def __init__(self, options: dict[str, int]) -> None:
        self.options = options
        self.path = bundled_dataset_path("5x5", "course")
        self.bare = self._env()
        self.adapter = ChatAdapter(self._env())

    def _env(self) -> AceEnv:
        dataset = read_dataset(self.path)
        dataset.compiled(self.options["instance_index"]).items  # noqa: B018 (builds the cached property)
        return AceEnv("course", source=DatasetSource(dataset), max_steps=10**9)

    def reset_bare(self) -> None:
        self.bare = self._env()
        self.bare.reset(options=self.options)

    def reset_unused(self) -> None:
        """The fresh read and reset the other resets do, its env unused (before a bare parse)."""
        self._env().reset(options=self.options)

    def reset_adapter(self) -> None:
        self.adapter = ChatAdapter(self._env())
        self.adapter.reset(options=self.options)


if __name__ == "__main__":
    main()
