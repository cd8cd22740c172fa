"""Turns and response size of the exact solver's episodes, default vs the fit settings
(:data:`ace_gym.eval.fit.FIT`), on the bundled 5x5 data, by hidden slots H.

Response = the model's calls (each call's name and JSON arguments) plus the tool replies, after
the opening prompt; tokens by the built-in estimate (:class:`ace_gym.runs.tokens.ApproxTokenizer`,
plus its per-message overhead). Run: ``python benchmarks/bench_fit.py``.
"""

from __future__ import annotations

from collections import defaultdict

from ace_gym.domains import DOMAIN_NAMES
from ace_gym.eval import EpisodeSpec, run_episodes
from ace_gym.eval.fit import FIT, fit_spec
from ace_gym.policies import make_policy
from ace_gym.runs.tokens import MESSAGE_OVERHEAD, ApproxTokenizer

INSTANCES = 35


def response(record: dict) -> tuple[int, int]:
    """(characters, estimated tokens) of an episode's calls and replies."""
    counter = ApproxTokenizer()
    characters = tokens = 0
    for message in record["messages"][2:]:
        texts = [message.get("content") or ""]
        texts += [c["function"]["name"] + c["function"]["arguments"] for c in message.get("tool_calls", ())]
        characters += sum(map(len, texts))
        tokens += sum(map(counter.count, texts)) + MESSAGE_OVERHEAD
    return characters, tokens


def main() -> None:
    specs = [EpisodeSpec.of(domain, instance_index=i) for domain in DOMAIN_NAMES for i in range(INSTANCES)]
    runs = {
        "default": run_episodes(specs, make_policy("solver")),
        "fit": run_episodes([fit_spec(spec) for spec in specs], make_policy(FIT["policy"])),
    }
    rows: dict[tuple[str, int], list[tuple[int, int, int, float]]] = defaultdict(list)
    for name, records in runs.items():
        for record in records:
            rows[(name, record["hidden_slots"])].append((record["usage"]["turns"], *response(record), record["score"]))
    print(
        "| H | turns default (mean/max) | turns fit | chars default (mean/max) | chars fit | tokens default (mean/max) | tokens fit | fit/default turns, chars, tokens (mean) | solved default, fit |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for hidden in sorted({h for _, h in rows}):
        d, f = rows[("default", hidden)], rows[("fit", hidden)]

        def cell(values: list, k: int) -> str:
            column = [v[k] for v in values]
            return f"{sum(column) / len(column):,.1f} / {max(column):,}"

        ratios = ", ".join(f"{sum(v[k] for v in f) / sum(v[k] for v in d):.2f}" for k in range(3))
        solved = f"{sum(v[3] for v in d):.0f}/{len(d)}, {sum(v[3] for v in f):.0f}/{len(f)}"
        print(
            f"| {hidden} | {cell(d, 0)} | {cell(f, 0)} | {cell(d, 1)} | {cell(f, 1)} | {cell(d, 2)} | {cell(f, 2)} | {ratios} | {solved} |"
        )


if __name__ == "__main__":
    main()
