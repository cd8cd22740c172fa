"""``ace-gym tokens``: what a policy's ACE episodes cost in tokens and turns, by domain and H.

``ace-gym tokens`` plays the exact solver (``--policy``: any scripted policy) on the bundled 5x5
data (``--dataset``: a bundled name, a file or a folder as ``ace-gym eval`` takes them; or
``--preset``: a procedural variant, ``--episodes`` per domain and H) under an env configuration
(the flags of ``ace-gym eval``: ``--domains``, ``--hidden-slots``, ``--decoy-budgets``,
``--seed``, ``--max-turns``, ``--wrappers`` and the tool budgets) and prints, per domain and
hidden-slot count H (and per H over all domains, domain ``all``), the episodes and the mean and
max of:

* ``prompt_tokens``: the opening prompt (system and user messages) with the tool schemas;
* ``response_tokens``: everything after it, ``model_tokens`` (the assistant turns: the calls)
  plus ``tool_tokens`` (what the env wrote back: tool replies, notices);
* ``turns``: policy turns (assistant messages).

The conversation counted is the one the chat adapter writes (:class:`~ace_gym.wrappers.ChatAdapter`).
``--tokenizer PATH`` counts with a Hugging Face tokenizer saved in a local folder (the ``hf``
extra; nothing is downloaded), through its chat template when it has one
(:func:`ace_gym.runs.tokens.conversation_tokens`); without it, counts are the documented estimate
(:class:`~ace_gym.runs.tokens.ApproxTokenizer` per message plus
:data:`~ace_gym.runs.tokens.MESSAGE_OVERHEAD`, the tool schemas as JSON text). Deterministic:
the same command prints the same numbers. ``--json`` prints one JSON object (docs/usage.md, "Token accounting").

``--fit`` plays the recommended training settings instead (:data:`ace_gym.eval.fit.FIT`: its env
keyword arguments on every episode, its reference policy unless ``--policy`` names one);
``--compare`` plays both and adds, per row, the fit/default ratio of each measure's mean.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ace_gym.cli_flags import add_common_flags, progress_bar, resolve_domains
from ace_gym.errors import ConfigError, did_you_mean, integer
from ace_gym.eval.cli import add_env_flags, dataset_specs, env_kwargs, shared_selection
from ace_gym.eval.episode_spec import EpisodeSpec
from ace_gym.eval.fit import FIT, fit_stack
from ace_gym.instance import BUNDLED_DATASETS
from ace_gym.policies import SCRIPTED_POLICIES, make_scripted_policy
from ace_gym.presets import PROCEDURAL_PRESETS
from ace_gym.runs.loop import Episode, actor_of, run_loop
from ace_gym.runs.tokens import ApproxTokenizer, ConversationTokens, HFTokenizer, Tokenizer, conversation_tokens
from ace_gym.stacks import StackSpec, setting_names
from ace_gym.stats import mean

DEFAULT_POLICY = "solver"
DEFAULT_EPISODES = 10
"""Episodes per domain and H on a procedural preset."""
MEASURES = ("prompt_tokens", "response_tokens", "model_tokens", "tool_tokens", "turns")
"""What each row gives the mean and max of."""


@dataclass(frozen=True)
class TokenEpisode:
    """One episode to measure: the env stack it plays (its whole configuration, one value), the
    reset ``seed`` and ``options``, and the scripted policy's seed."""

    stack: StackSpec
    seed: int
    options: Mapping[str, Any]
    policy_seed: int


def register(subparsers: Any) -> None:
    tokens = subparsers.add_parser(
        "tokens",
        help="tokens and turns a policy's episodes cost, by domain and hidden slots",
        description="Play a scripted policy (default: the exact solver) on a dataset or a procedural preset "
        "and print, per domain and hidden-slot count H, the mean and max of the prompt tokens (with the tool "
        "schemas), the response tokens (model tokens + tool-reply tokens) and the turns. Counted with "
        "--tokenizer (a local Hugging Face tokenizer folder, through its chat template) or, without it, "
        "with the built-in estimate (docs/usage.md, Token accounting).",
    )
    tokens.add_argument(
        "--policy",
        default=None,
        help=f"scripted policy ({', '.join(SCRIPTED_POLICIES)}; default {DEFAULT_POLICY}, "
        f"with --fit {FIT['policy']}; with --compare each side's)",
    )
    settings = tokens.add_mutually_exclusive_group()
    settings.add_argument(
        "--fit",
        action="store_true",
        help="play the recommended training settings (ace_gym.eval.fit.FIT: compact observations, "
        f"several calls per turn, policy {FIT['policy']}; docs/training.md)",
    )
    settings.add_argument(
        "--compare",
        action="store_true",
        help="play the default and the --fit settings and print both with the fit/default ratio of each mean",
    )
    source = tokens.add_mutually_exclusive_group()
    source.add_argument(
        "--dataset",
        default="5x5",
        help=f"bundled name ({', '.join(BUNDLED_DATASETS)}), a dataset file, or a folder of dataset files (default 5x5)",
    )
    source.add_argument(
        "--preset",
        default=None,
        help=f"a procedural variant instead of a dataset ({', '.join(PROCEDURAL_PRESETS)}): --episodes per domain and H",
    )
    tokens.add_argument(
        "--episodes",
        type=int,
        default=DEFAULT_EPISODES,
        help=f"with --preset: episodes per domain and H, reset seeds --seed, --seed+1, ... (default {DEFAULT_EPISODES})",
    )
    add_common_flags(
        tokens,
        defaults={"seed": 0},
        helps={
            "hidden_slots": "keep only these hidden-slot counts (default: all the dataset or preset holds)",
            "decoy_budgets": "keep only instances with these decoy budgets (dataset only; default: all)",
            "seed": "reset seed (with --preset: of the first episode of each domain and H)",
        },
        out=False,
    )
    add_env_flags(tokens)
    tokens.add_argument(
        "--tokenizer",
        default=None,
        metavar="PATH",
        help="a local Hugging Face tokenizer folder (needs transformers: the hf extra); default: the built-in estimate",
    )
    tokens.add_argument("--json", action="store_true", help="print one JSON object (rows and what was counted)")
    tokens.set_defaults(handler=run_tokens)


def run_tokens(args: argparse.Namespace) -> int:
    if args.policy is not None and args.policy not in SCRIPTED_POLICIES:
        raise ConfigError(
            "policy",
            args.policy,
            f"ace-gym tokens plays scripted policies: {', '.join(SCRIPTED_POLICIES)}"
            f"{did_you_mean(args.policy, SCRIPTED_POLICIES)}",
        )
    integer("seed", args.seed, minimum=0)  # a reset seed: refused before anything plays
    tokenizer: Tokenizer = ApproxTokenizer() if args.tokenizer is None else HFTokenizer(args.tokenizer)
    if not args.compare:
        report = token_report(args, tokenizer, fit=args.fit)
        print(json.dumps(report, indent=1) if args.json else format_rows(report["rows"], report))
        return 0
    default, fit = token_report(args, tokenizer, fit=False), token_report(args, tokenizer, fit=True)
    compared = {"default": default, "fit": fit, "ratios": fit_ratios(default["rows"], fit["rows"])}
    print(json.dumps(compared, indent=1) if args.json else format_comparison(compared))
    return 0


def token_report(args: argparse.Namespace, tokenizer: Tokenizer, *, fit: bool) -> dict[str, Any]:
    """The report of one configuration: the flags' (``fit=False``) or the flags' with
    :data:`~ace_gym.eval.fit.FIT` applied; ``policy`` is ``--policy`` or the configuration's own."""
    policy = args.policy or (FIT["policy"] if fit else DEFAULT_POLICY)
    episodes = preset_episodes(args) if args.preset is not None else dataset_episodes(args)
    if fit:
        episodes = [dataclasses.replace(episode, stack=fit_stack(episode.stack)) for episode in episodes]
    with progress_bar(len(episodes), "tokens (fit)" if fit else "tokens", "ep", not args.no_progress) as bar:
        measured = []
        for counted in measure(episodes, policy, tokenizer):
            measured.append(counted)
            bar.update()
    return {
        "policy": policy,
        "settings": "fit" if fit else "default",
        "env_kwargs": dict(FIT["env_kwargs"]) if fit else {},
        "source": {"preset": args.preset} if args.preset is not None else {"dataset": args.dataset},
        "tokenizer": args.tokenizer or "estimate",
        "counted_by": sorted({row["counted_by"] for row in measured}),
        "rows": token_rows(measured),
    }


def fit_ratios(default: Sequence[Mapping[str, Any]], fit: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per (domain, H) row of both: the fit/default ratio of each of :data:`MEASURES`' means
    (3 decimals; None where the default's mean is 0)."""
    by_key = {(row["domain"], row["hidden_slots"]): row for row in default}
    ratios = []
    for row in fit:
        base = by_key[row["domain"], row["hidden_slots"]]
        ratio = {"domain": row["domain"], "hidden_slots": row["hidden_slots"]}
        for name in MEASURES:
            mean = base[name]["mean"]
            ratio[name] = round(row[name]["mean"] / mean, 3) if mean else None
        ratios.append(ratio)
    return ratios


def dataset_episodes(args: argparse.Namespace) -> list[TokenEpisode]:
    """One plain episode per dataset instance the flags select (as ``ace-gym eval`` selects them)."""
    return [
        TokenEpisode(spec.stack, spec.seed, spec.reset_options(), spec.policy_seed())
        for spec in dataset_specs(**shared_selection(args))
    ]


def preset_episodes(args: argparse.Namespace) -> list[TokenEpisode]:
    """``--episodes`` episodes per domain and H of the procedural variant ``--preset``: reset seeds
    ``--seed`` on, H pinned by the reset options, the decoy budget drawn as the variant draws it."""
    preset = args.preset
    if preset not in PROCEDURAL_PRESETS:
        raise ConfigError(
            "preset", preset, f"known: {', '.join(PROCEDURAL_PRESETS)}{did_you_mean(preset, PROCEDURAL_PRESETS)}"
        )
    if args.decoy_budgets is not None:
        raise ConfigError("decoy-budgets", args.decoy_budgets, "selects dataset instances; a preset draws the budget")
    count = integer("episodes", args.episodes, minimum=1)
    held = list(PROCEDURAL_PRESETS[preset]["hidden_slots"])  # type: ignore[arg-type]
    wanted = args.hidden_slots if args.hidden_slots is not None else held
    missing = sorted(set(wanted) - set(held))
    if missing:
        raise ConfigError("hidden-slots", wanted, f"{preset} draws hidden slots {', '.join(map(str, held))} only")
    settings = setting_names(args.wrappers, "wrappers")
    episodes = []
    for domain in resolve_domains(args.domains):
        spec = EpisodeSpec.of(domain, env_kwargs=env_kwargs(args), max_turns=args.max_turns, settings=settings)
        dataset_stack = spec.stack  # the stack eval plays, on the procedural env instead of a dataset's
        kwargs = {k: v for k, v in dataset_stack.env_kwargs.items() if k != "dataset"}
        stack = StackSpec(f"ACE-{domain}-{preset}-v0", kwargs, dataset_stack.wrappers)
        for hidden in wanted:
            for seed in range(args.seed, args.seed + count):
                policy_seed = int(np.random.SeedSequence([seed, 0]).generate_state(1)[0])
                episodes.append(TokenEpisode(stack, seed, {"hidden_slots": hidden}, policy_seed))
    return episodes


def measure(episodes: Iterable[TokenEpisode], policy: str, tokenizer: Tokenizer) -> Iterator[dict[str, Any]]:
    """Play each episode with the scripted ``policy`` and yield, in order, its ``domain``,
    ``hidden_slots``, ``score``, ``turns`` and token counts (:func:`conversation_tokens`)."""
    actor = actor_of(make_scripted_policy(policy))
    return run_loop(episodes, lambda episode: _open(episode, policy, tokenizer), actor, batch_size=1)


def _open(item: TokenEpisode, policy: str, tokenizer: Tokenizer) -> tuple[Episode, Any, dict[str, Any]]:
    def record(episode: Episode, terminated: bool, truncated: bool, info: Mapping[str, Any]) -> dict[str, Any]:
        counted: ConversationTokens = conversation_tokens(episode.messages, episode.tools, tokenizer)
        return {
            "domain": episode.reset_info["domain"],
            "hidden_slots": int(episode.reset_info["hidden_slots"]),
            "score": float(info.get("score") or 0.0),
            "turns": episode.usage["turns"],
            "prompt_tokens": counted.prompt,
            "response_tokens": counted.response,
            "model_tokens": counted.model,
            "tool_tokens": counted.tool,
            "counted_by": counted.counted_by,
        }

    episode = Episode(item.stack.key(), policy, item.stack.make(), record, policy_seed=item.policy_seed)
    observation, info = episode.reset(seed=item.seed, options=dict(item.options))
    return episode, observation, info


def token_rows(measured: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per domain and H (domains in the order first played, H ascending), then one per H
    over every domain (domain ``"all"``) when more than one domain was played: ``domain``,
    ``hidden_slots``, ``episodes``, ``score`` (mean) and ``{"mean", "max"}`` of each of
    :data:`MEASURES`."""
    groups: dict[tuple[str, int], list[Mapping[str, Any]]] = defaultdict(list)
    for episode in measured:
        groups[episode["domain"], episode["hidden_slots"]].append(episode)
        groups["all", episode["hidden_slots"]].append(episode)
    domains = list(dict.fromkeys(episode["domain"] for episode in measured))
    if len(domains) > 1:
        domains.append("all")
    return [
        _row(domain, hidden, groups[domain, hidden])
        for domain in domains
        for hidden in sorted(h for d, h in groups if d == domain)
    ]


def _row(domain: str, hidden: int, episodes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    row: dict[str, Any] = {"domain": domain, "hidden_slots": hidden, "episodes": len(episodes)}
    row["score"] = round(mean(e["score"] for e in episodes), 4)
    for name in MEASURES:
        values = [e[name] for e in episodes]
        row[name] = dict(mean=round(mean(values), 1), max=max(values))  # keywords: "max" is no rule kind here
    return row


def format_rows(rows: Sequence[Mapping[str, Any]], report: Mapping[str, Any]) -> str:
    """The rows as a text table (mean / max per column), under a line naming what was counted."""
    header = ("domain", "H", "episodes", "score", "prompt", "response", "model", "tool", "turns")
    lines = [header]
    for row in rows:
        pairs = ["{mean:g} / {max}".format(**row[name]) for name in MEASURES]
        lines.append((row["domain"], str(row["hidden_slots"]), str(row["episodes"]), f"{row['score']:g}", *pairs))
    widths = [max(len(line[k]) for line in lines) for k in range(len(header))]
    text = "\n".join("  ".join(cell.rjust(width) for cell, width in zip(line, widths, strict=True)) for line in lines)
    source = ", ".join(f"{key} {value}" for key, value in report["source"].items())
    counted = f"tokenizer {report['tokenizer']} ({', '.join(report['counted_by'])})"
    settings = f", {report['settings']} settings" if "settings" in report else ""
    return f"policy {report['policy']}{settings}, {source}, {counted}; tokens and turns per episode, mean / max\n{text}"


def format_comparison(compared: Mapping[str, Any]) -> str:
    """Both reports' tables, then a table of the fit/default ratios of the means."""
    header = ("domain", "H", *(name.removesuffix("_tokens") for name in MEASURES))
    lines = [header]
    for ratio in compared["ratios"]:
        cells = ["-" if ratio[name] is None else f"{ratio[name]:.3f}" for name in MEASURES]
        lines.append((ratio["domain"], str(ratio["hidden_slots"]), *cells))
    widths = [max(len(line[k]) for line in lines) for k in range(len(header))]
    text = "\n".join("  ".join(cell.rjust(width) for cell, width in zip(line, widths, strict=True)) for line in lines)
    default, fit = compared["default"], compared["fit"]
    return (
        f"{format_rows(default['rows'], default)}\n\n{format_rows(fit['rows'], fit)}\n\n"
        f"fit / default, ratio of the means\n{text}"
    )
