"""``ace-gym eval`` and ``ace-gym report``: evaluate a policy on ACE datasets, resumably.

``ace-gym eval --policy solver --dataset 5x5 --out runs/solver`` runs every selected episode
(domains x instances x tool-failure rates x trials), appends one record per episode to
``DIR/episodes.jsonl`` as it finishes, then writes ``DIR/summary.json`` and
``DIR/heatmap_<domain>.png`` and prints the paper-style table. Re-running the same command skips
the episodes already in the file, so a killed evaluation resumes where it stopped.
``ace-gym report DIR`` rebuilds table, summary and heatmaps from ``episodes.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ace_gym.agents import SCRIPTED_POLICIES, ChatEngine, ScriptedPolicy, make_scripted_policy
from ace_gym.domains import DOMAIN_NAMES
from ace_gym.errors import AceGymError, ConfigError, did_you_mean
from ace_gym.eval.plots import matplotlib_available, write_heatmaps
from ace_gym.eval.results import EPISODES_FILE, SUMMARY_FILE, EpisodeLog, read_records, write_json_atomic
from ace_gym.eval.rollout import EpisodeSpec, run_episodes
from ace_gym.eval.summary import format_table, summarize
from ace_gym.instance import BUNDLED_DATASETS, Dataset, load_dataset, resolve_dataset
from ace_gym.longbench import cli as alb_cli

logger = logging.getLogger(__name__)
LLM_PREFIXES = ("vllm", "hf", "openai")


def register(subparsers: Any) -> None:
    evaluate = subparsers.add_parser(
        "eval",
        help="evaluate a policy on ACE datasets (resumable)",
        description="Run a policy on every selected episode and write DIR/episodes.jsonl (one record per "
        "episode, appended atomically), DIR/summary.json and DIR/heatmap_<domain>.png. Re-running the "
        "same command resumes: finished episodes are skipped.",
    )
    evaluate.add_argument(
        "--policy",
        required=True,
        help=f"{'|'.join(SCRIPTED_POLICIES)}|vllm:MODEL_PATH|hf:MODEL_PATH|openai:MODEL@URL",
    )
    evaluate.add_argument(
        "--dataset",
        default="5x5",
        help=f"bundled name ({', '.join(BUNDLED_DATASETS)}), a dataset file, or a folder of dataset files",
    )
    evaluate.add_argument("--domains", default="all", help="'all' or a comma list, e.g. course,meal")
    evaluate.add_argument("--hidden", type=_int_list, default=None, help="hidden-slot values to keep, e.g. 1,5,7")
    evaluate.add_argument("--budget", type=_int_list, default=None, help="decoy-budget values to keep, e.g. 0,2,4")
    evaluate.add_argument("--tool-failure-rates", type=_float_list, default=[0.0], help="comma list, e.g. 0,0.1")
    evaluate.add_argument("--trials", type=int, default=1, help="episodes per instance and rate (a GRPO-style group)")
    evaluate.add_argument("--seed", type=int, default=0, help="reset seed shared by the trials of an instance")
    evaluate.add_argument("--out", type=Path, required=True, help="output directory")
    evaluate.add_argument("--max-turns", type=int, default=None, help="policy turns per episode (default 1000)")
    evaluate.add_argument(
        "--batch-size", type=int, default=None, help="episodes run together (default 1 scripted, 32 LLM)"
    )
    evaluate.add_argument("--extra-query-num", type=int, default=-1, help="per-slot query budget extra; -1 unlimited")
    evaluate.add_argument("--global-check-alpha", type=float, default=-1, help="global checks = alpha*H; -1 unlimited")
    evaluate.add_argument("--check-include-reason", action="store_true", help="check tools explain failures")
    evaluate.add_argument("--max-query-ids", type=int, default=5)
    evaluate.add_argument("--max-query-fields", type=int, default=5)
    evaluate.add_argument(
        "--engine-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="option for an LLM engine (VALUE read as JSON when it parses), repeatable",
    )
    evaluate.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    alb_cli.add_arguments(evaluate)
    evaluate.set_defaults(handler=run_eval)

    report = subparsers.add_parser(
        "report",
        help="rebuild table, summary.json and heatmaps from DIR/episodes.jsonl",
        description="Rebuild the paper-style table, DIR/summary.json and DIR/heatmap_<domain>.png from "
        "the episode records in DIR/episodes.jsonl.",
    )
    report.add_argument("dir", type=Path)
    report.set_defaults(handler=run_report)


def _int_list(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a comma list of integers, got {text!r}") from None


def _float_list(text: str) -> list[float]:
    try:
        values = [float(part) for part in text.strip("[]").split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a comma list of numbers, got {text!r}") from None
    if not values or any(not 0.0 <= v <= 1.0 for v in values):
        raise argparse.ArgumentTypeError(f"failure rates must be probabilities in [0, 1], got {text!r}")
    return values


def parse_domains(text: str) -> list[str]:
    if text.strip() == "all":
        return list(DOMAIN_NAMES)
    domains = [part.strip() for part in text.split(",") if part.strip()]
    for domain in domains:
        if domain not in DOMAIN_NAMES:
            raise ConfigError(
                "domains", domain, f"known: all, {', '.join(DOMAIN_NAMES)}{did_you_mean(domain, DOMAIN_NAMES)}"
            )
    return domains


def dataset_sources(dataset: str, domains: Sequence[str]) -> dict[str, tuple[str, Dataset]]:
    """For each domain: (dataset string stored in episode keys, loaded dataset).

    ``dataset`` is a bundled name, one dataset file (only its own domain is used) or a folder
    holding ``<domain>_dataset_*`` files (one per domain, as ``ace-gym generate`` writes them).
    """
    path = Path(dataset)
    if path.is_dir():
        found = {}
        for domain in domains:
            files = sorted(p for p in path.iterdir() if p.name.startswith(f"{domain}_dataset_"))
            if len(files) != 1:
                raise ConfigError("dataset", dataset, f"needs exactly one {domain}_dataset_* file, found {len(files)}")
            found[domain] = (str(files[0].resolve()), load_dataset(files[0]))
        return found
    if path.is_file():
        loaded = load_dataset(path)
        if loaded.domain.name not in domains:
            raise ConfigError("domains", list(domains), f"{dataset} holds domain {loaded.domain.name!r} only")
        return {loaded.domain.name: (str(path.resolve()), loaded)}
    return {domain: (dataset, resolve_dataset(dataset, domain)) for domain in domains}


def build_specs(args: argparse.Namespace) -> list[EpisodeSpec]:
    """Every episode the command selects, in (domain, instance, rate, trial) order."""
    env_kwargs = {
        "extra_query_num": args.extra_query_num,
        "global_check_alpha": args.global_check_alpha,
        "check_include_reason": args.check_include_reason,
        "max_query_ids": args.max_query_ids,
        "max_query_fields": args.max_query_fields,
    }
    if args.trials < 1:
        raise ConfigError("trials", args.trials, "must be a positive integer")
    specs = []
    for domain, (source, dataset) in dataset_sources(args.dataset, parse_domains(args.domains)).items():
        for index, instance in enumerate(dataset):
            if args.hidden is not None and instance.meta.hidden_slots not in args.hidden:
                continue
            if args.budget is not None and instance.meta.branch_budget not in args.budget:
                continue
            for rate in args.tool_failure_rates:
                for trial in range(args.trials):
                    specs.append(
                        EpisodeSpec(
                            domain,
                            source,
                            instance_index=index,
                            instance_id=instance.instance_id,
                            seed=args.seed,
                            trial=trial,
                            tool_failure_rate=rate,
                            env_kwargs=env_kwargs,
                            max_turns=args.max_turns,
                        )
                    )
    return specs


def policy_label(spec: str, options: Iterable[str]) -> tuple[str, dict[str, Any]]:
    """Validate a ``--policy`` value; returns its label in episode keys (LLM options included,
    since they change results) and the parsed engine options."""
    if spec in SCRIPTED_POLICIES:
        return spec, {}
    if spec.partition(":")[0] not in LLM_PREFIXES or ":" not in spec:
        raise ConfigError(
            "policy",
            spec,
            f"expected {', '.join(SCRIPTED_POLICIES)} or vllm:PATH, hf:PATH, openai:MODEL@URL"
            f"{did_you_mean(spec, SCRIPTED_POLICIES)}",
        )
    engine_options = dict(_option(text) for text in options)
    label = spec if not engine_options else f"{spec} {json.dumps(engine_options, sort_keys=True)}"
    return label, engine_options


def make_policy(spec: str, engine_options: dict[str, Any]) -> ScriptedPolicy | ChatEngine:
    """Build the policy of a validated ``--policy`` value (loads the model of an LLM policy)."""
    if spec in SCRIPTED_POLICIES:
        return make_scripted_policy(spec)
    prefix = spec.partition(":")[0]
    try:  # the engines import their back end (vllm, transformers, openai) when built
        from ace_gym.agents.llm import make_engine

        return make_engine(spec, **engine_options)
    except ImportError as error:
        raise ConfigError(
            "policy",
            spec,
            f"LLM policies need ace_gym.agents.llm and its optional dependencies ({error}); "
            f"install e.g. pip install 'ace-gym[{prefix}]'",
        ) from None


def _option(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ConfigError("engine-option", text, "must be KEY=VALUE")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


class Progress:
    """Progress on stderr: episodes done, running score, elapsed time and ETA. A terminal gets
    one redrawn line; a pipe or file gets a line every :attr:`interval_s` seconds and at the end."""

    interval_s = 10.0

    def __init__(self, total: int, skipped: int, enabled: bool) -> None:
        self.total, self.done, self.solved, self.enabled = total, skipped, 0.0, enabled
        self.skipped = skipped
        self.started = self.printed = time.perf_counter()
        self.redraw = enabled and sys.stderr.isatty()

    def update(self, record: dict[str, Any]) -> None:
        self.done += 1
        self.solved += float(record["score"] or 0.0)
        now = time.perf_counter()
        last = self.done >= self.total
        if not self.enabled or not (self.redraw or last or now - self.printed >= self.interval_s):
            return
        self.printed = now
        run = self.done - self.skipped
        elapsed = now - self.started
        eta = elapsed / run * (self.total - self.done)
        width = 24
        filled = width * self.done // max(self.total, 1)
        line = (
            f"[{'#' * filled}{' ' * (width - filled)}] {self.done}/{self.total} episodes"
            f"  score {self.solved / run:.3f}  {elapsed:.0f}s elapsed, ~{eta:.0f}s left"
        )
        sys.stderr.write(f"\r{line} " + ("\n" if last else "") if self.redraw else line + "\n")
        sys.stderr.flush()


def run_eval(args: argparse.Namespace) -> int:
    if args.env is not None:
        return alb_cli.run_eval(args)
    try:
        specs = build_specs(args)
        label, engine_options = policy_label(args.policy, args.engine_option)
        out: Path = args.out
        with EpisodeLog(out / EPISODES_FILE) as log:
            _refuse_mixing(log.path, label, specs)
            pending = [spec for spec in specs if spec.key(label) not in log.keys]
            skipped = len(specs) - len(pending)
            if skipped:
                print(f"resuming: {skipped} of {len(specs)} episodes already in {log.path}", file=sys.stderr)
            if pending:  # a finished run only rebuilds its report: no model is loaded
                _run_pending(args, pending, make_policy(args.policy, engine_options), label, log, skipped)
    except AceGymError as error:
        print(f"ace-gym eval: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted: finished episodes are saved; re-run the same command to resume", file=sys.stderr)
        return 130
    return _write_report(out)


def _run_pending(
    args: argparse.Namespace,
    pending: list[EpisodeSpec],
    policy: ScriptedPolicy | ChatEngine,
    label: str,
    log: EpisodeLog,
    skipped: int,
) -> None:
    batch_size = args.batch_size or (1 if isinstance(policy, ScriptedPolicy) else 32)
    progress = Progress(len(pending) + skipped, skipped, not args.no_progress)
    try:
        for record in run_episodes(pending, policy, batch_size=batch_size, name=label):
            log.append(record)
            progress.update(record)
    finally:
        close = getattr(policy, "close", None)
        if callable(close):  # e.g. an HTTP client pool
            close()


def _refuse_mixing(path: Path, label: str, specs: Sequence[EpisodeSpec]) -> None:
    """One output directory holds one policy under one configuration (its summary pools them)."""
    configs = {spec.key(label).rsplit("|", 1)[1] for spec in specs}
    for record in read_records(path):
        if record.get("policy") != label:
            raise ConfigError("out", str(path.parent), f"holds episodes of another policy ({record.get('policy')})")
        if str(record.get("key", "")).rsplit("|", 1)[-1] not in configs:
            raise ConfigError("out", str(path.parent), "holds episodes run with other budgets or max turns")


def run_report(args: argparse.Namespace) -> int:
    if not (args.dir / EPISODES_FILE).exists():
        print(f"ace-gym report: no {EPISODES_FILE} in {args.dir}", file=sys.stderr)
        return 2
    try:
        return _write_report(args.dir)
    except AceGymError as error:
        print(f"ace-gym report: {error}", file=sys.stderr)
        return 2


def _write_report(out: Path) -> int:
    """summary.json, heatmaps and the printed table from ``out/episodes.jsonl``."""
    if alb_cli.is_alb_run(out):
        return alb_cli.write_report(out)
    summary = summarize(read_records(out / EPISODES_FILE))
    write_json_atomic(out / SUMMARY_FILE, summary)
    if matplotlib_available():
        write_heatmaps(summary, out)
    else:
        print("matplotlib is not installed: no heatmaps (pip install 'ace-gym[plot]')", file=sys.stderr)
    print(format_table(summary))
    print(f"\nresults: {os.fspath(out)}")
    return 0
