"""The largest prompt a model is shown in one turn, with and without the context policy
(:class:`ace_gym.wrappers.ContextWindow`), for the exact solver's episodes on the bundled 5x5
data, by hidden slots H: the default settings, and the fit settings (:data:`ace_gym.eval.fit.FIT`).

A turn's prompt is the messages the model was shown for it (:func:`ace_gym.runs.loop.turn_samples`:
the whole conversation before the turn, or the turn's context) plus the tool schemas, counted as
``ace-gym tokens`` counts without a tokenizer (:func:`ace_gym.runs.tokens.message_tokens` with the
built-in estimate, the schemas as their JSON text). Run: ``python benchmarks/bench_context.py
[INSTANCES_PER_DOMAIN [TOKENIZER_PATH]]``.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from ace_gym.domains import DOMAIN_NAMES
from ace_gym.eval import EpisodeSpec, run_episodes
from ace_gym.eval.fit import FIT, fit_spec
from ace_gym.policies import make_policy
from ace_gym.runs.loop import turn_samples
from ace_gym.runs.tokens import Tokenizer, message_tokens, resolve_tokenizer

RUNS: dict[str, tuple[bool, dict[str, Any] | None]] = {
    "default": (False, None),
    "default, last 4 turns": (False, {"last_turns": 4}),
    "fit": (True, None),
    "fit, last 1 turn": (True, {"last_turns": 1}),
}
"""Each run's name: (fit settings, the context policy's arguments or None)."""


def largest_prompt(record: Mapping[str, Any], tokenizer: Tokenizer) -> int:
    """The estimated tokens of the largest prompt of the record's turns, tool schemas included."""
    tools = tokenizer.count(json.dumps(record["tools"], ensure_ascii=False))
    counted: dict[int, tuple[Mapping[str, Any], int]] = {}  # by id, holding the message so no id is reused

    def tokens(message: Mapping[str, Any]) -> int:
        if id(message) not in counted:
            counted[id(message)] = (message, message_tokens(tokenizer, message))
        return counted[id(message)][1]

    return tools + max(sum(map(tokens, sample["messages"])) for sample in turn_samples(record))


def main() -> None:
    instances = int(sys.argv[1]) if len(sys.argv) > 1 else 35
    tokenizer = resolve_tokenizer(sys.argv[2] if len(sys.argv) > 2 else None)
    largest: dict[tuple[str, int], list[int]] = defaultdict(list)
    for name, (fit, context) in RUNS.items():
        specs = [
            EpisodeSpec.of(domain, instance_index=i, context=context)
            for domain in DOMAIN_NAMES
            for i in range(instances)
        ]
        specs = [fit_spec(spec) for spec in specs] if fit else specs
        for record in run_episodes(specs, make_policy(FIT["policy"] if fit else "solver")):
            assert record["score"] == 1.0, record["key"]
            largest[(name, record["hidden_slots"])].append(largest_prompt(record, tokenizer))
    print(f"Largest prompt in one turn, {tokenizer!r} tokens with the tool schemas (mean / max over episodes)\n")
    print("| H | " + " | ".join(RUNS) + " |")
    print("|---|" + "---|" * len(RUNS))
    for hidden in sorted({h for _, h in largest}):
        cells = [largest[(name, hidden)] for name in RUNS]
        print(f"| {hidden} | " + " | ".join(f"{sum(c) / len(c):,.0f} / {max(c):,}" for c in cells) + " |")


if __name__ == "__main__":
    main()
