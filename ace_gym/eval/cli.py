"""``ace-gym eval`` and ``ace-gym report``: evaluate a policy on ACE datasets, resumably.

``ace-gym eval --policy solver --dataset 5x5 --out runs/solver`` runs every selected episode
(domains x instances x tool-failure rates x trials), appends one record per episode to
``DIR/episodes.jsonl`` as it finishes, then writes ``DIR/summary.json`` and the heatmaps
(``DIR/heatmap_<domain>_failure<rate>.png``; ``--heatmap-formats png pdf svg`` adds vector files)
and prints the paper-style table.
Re-running the same command skips the episodes already in the file, so a killed evaluation
resumes where it stopped; while it runs, the directory is locked (a second eval on it exits 3).

An output directory holds one run: ``summary.json["run"]`` records its policy, dataset, settings
(budgets, ``max_turns``, ``seed``) and ace-gym version from the first eval on, and a later eval
that differs in any of them is refused, naming what differs, once the folder holds an episode (a
run refused before it stored one, for a missing extra or an unreachable model or env server,
leaves its folder to the corrected command). Domains, hidden-slot and decoy-budget
filters, tool-failure rates and trials may grow between evals: they add episodes to the same run.

``--dataset FOLDER`` (files ``ace-gym generate`` wrote) runs the domains the folder holds files of,
unless ``--domains`` names some.

``ace-gym report DIR`` rebuilds table, summary and heatmaps from ``episodes.jsonl``; it may run
while an eval writes to DIR. Both remove the temporary files a report killed mid-write left.
Both refuse an episode file with malformed complete lines (exit 5, naming them; the file is never
modified) unless given ``--skip-malformed``, which leaves those lines out (listed in
``summary.json["skipped_lines"]``); eval then re-runs the episodes they held. Exit codes are listed in :mod:`ace_gym.exit_codes`.

Each benchmark (:data:`ace_gym.stacks.BENCHMARKS`) adds its flags and what they ask of an episode
(AgencyBench's ``--feedback-rounds``, ``--scenario``), and may run an evaluation of its own items
(``ace-gym eval --env ALB-QA-v0``: AgentLongBench's questions), which runs through the same code:
lock, run identity, resume, malformed lines, report, exit codes.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from ace_gym import __version__
from ace_gym.agents import is_engine_spec
from ace_gym.atomic import read_regular_file, remove_stale_temporaries
from ace_gym.benchmark import Evaluation, Report
from ace_gym.cli_flags import ListAction, add_common_flags, output_directory, progress_bar, resolve_domains
from ace_gym.domains import DOMAIN_NAMES
from ace_gym.errors import ConfigError, choice, integer
from ace_gym.eval.episode_spec import EpisodeSpec
from ace_gym.eval.plots import DEFAULT_HEATMAP_FORMATS, HEATMAP_FORMATS, matplotlib_available, write_heatmaps
from ace_gym.eval.rollout import run_episodes
from ace_gym.eval.summary import format_table, summarize
from ace_gym.instance import BUNDLED_DATASETS, Dataset, load_dataset, resolve_dataset
from ace_gym.policies import POLICY_SPECS, make_policy, policy_label
from ace_gym.runs.results import (
    EPISODES_FILE,
    MAX_SUMMARY_BYTES,
    SUMMARY_FILE,
    EpisodeLog,
    read_records,
    write_json_atomic,
)
from ace_gym.stacks import BENCHMARKS, setting_names, wrapper_names
from ace_gym.wrappers import FAILURE_ENVELOPES

logger = logging.getLogger(__name__)
_RESUME_HINT = "; finished episodes are saved: re-run the same command to resume"
_REPORT_HINT = "; episodes.jsonl is untouched: re-run the same command"
_EVAL_WRITE_HINT = "choose a writable --out folder, or make this one writable"
_REPORT_WRITE_HINT = "make the run folder writable, or copy it somewhere writable and report the copy"

WRAPPER_CHOICES: tuple[str, ...] = wrapper_names(settings=True)
"""What ``--wrappers`` takes: the settings of the wrapper registry (:mod:`ace_gym.stacks`)."""


def register(subparsers: Any) -> None:
    evaluate = subparsers.add_parser(
        "eval",
        help="evaluate a policy on ACE datasets (resumable)",
        description="Run a policy on every selected episode and write DIR/episodes.jsonl (one record per "
        "episode, appended atomically), DIR/summary.json and heatmaps. Re-running the same command "
        "resumes: finished episodes are skipped. DIR holds one run (policy, dataset, settings); a "
        "different one is refused.",
    )
    evaluate.add_argument(
        "--policy",
        required=True,
        help=POLICY_SPECS,
    )
    evaluate.add_argument(
        "--dataset",
        default="5x5",
        help=f"bundled name ({', '.join(BUNDLED_DATASETS)}), a dataset file, or a folder of dataset files "
        "(default domains: those the folder holds)",
    )
    add_common_flags(
        evaluate,
        defaults={"seed": 0},
        helps={
            "hidden_slots": "keep only instances with these hidden-slot counts (default: all)",
            "decoy_budgets": "keep only instances with these decoy budgets (default: all)",
            "seed": "reset seed shared by the trials of an instance",
            "out": "output directory (created if missing; re-using it resumes the run)",
        },
    )
    evaluate.add_argument(
        "--tool-failure-rates",
        nargs="+",
        action=ListAction,
        const=_probability,
        default=[0.0],
        metavar="P",
        help="probabilities that a tool call fails, e.g. 0 0.1 (default 0; one heatmap each)",
    )
    evaluate.add_argument(
        "--failure-modes",
        nargs="+",
        action=ListAction,
        const=str,
        default=None,
        metavar="MODE",
        help=f"what an injected failure returns, drawn per failure from {', '.join(FAILURE_ENVELOPES)} "
        "(default failed: the published 'Tool call failed'); docs/replay.md",
    )
    evaluate.add_argument("--trials", type=int, default=1, help="episodes per instance and rate (a GRPO-style group)")
    add_env_flags(evaluate)
    evaluate.add_argument(
        "--batch-size", type=int, default=None, help="episodes run together (default 1 scripted, 32 LLM)"
    )
    evaluate.add_argument(
        "--engine-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="option for an LLM engine (VALUE read as JSON when it parses), repeatable",
    )
    _add_skip_malformed(evaluate)
    evaluate.add_argument("--env-url", default=None, help="play the episodes in an ace-gym serve server at this URL")
    evaluate.add_argument(
        "--backend",
        choices=("local", "ray"),
        default="local",
        help="ray: play the episodes in Ray workers (records as local; a dead worker's episodes re-run)",
    )
    evaluate.add_argument("--address", default=None, help="Ray cluster to join (default: RAY_ADDRESS, else local)")
    evaluate.add_argument("--ray-workers", type=int, default=None, help="Ray workers (default: one per cluster CPU)")
    for benchmark in BENCHMARKS:
        benchmark.add_eval_flags(evaluate)
    evaluate.set_defaults(handler=run_eval, resume_hint=_RESUME_HINT, write_hint=_EVAL_WRITE_HINT)

    report = subparsers.add_parser(
        "report",
        help="rebuild table, summary.json and heatmaps from DIR/episodes.jsonl",
        description="Rebuild the paper-style table, DIR/summary.json and the heatmaps from the episode "
        "records in DIR/episodes.jsonl (safe while an eval is writing to DIR).",
    )
    report.add_argument("dir", type=Path, help="output directory of an eval")
    _add_skip_malformed(report)
    report.set_defaults(handler=run_report, resume_hint=_REPORT_HINT, write_hint=_REPORT_WRITE_HINT)


def add_env_flags(parser: argparse.ArgumentParser) -> None:
    """Add the env configuration flags ``eval`` and ``tokens`` share: ``--max-turns``, the tool
    budgets (:func:`env_kwargs`) and ``--wrappers``."""
    parser.add_argument("--max-turns", type=int, default=None, help="policy turns per episode (default 1000)")
    parser.add_argument("--extra-query-num", type=int, default=-1, help="per-slot query budget extra; -1 unlimited")
    parser.add_argument("--global-check-alpha", type=float, default=-1, help="global checks = alpha*H; -1 unlimited")
    parser.add_argument("--check-include-reason", action="store_true", help="check tools explain failures")
    parser.add_argument("--max-query-ids", type=int, default=5, help="item ids one info query may name")
    parser.add_argument("--max-query-fields", type=int, default=5, help="attributes one info query may name")
    parser.add_argument(
        "--wrappers",
        nargs="+",
        action=ListAction,
        const=str,
        default=[],
        metavar="SETTING",
        help=f"planning settings to wrap the env in ({', '.join(WRAPPER_CHOICES)}), e.g. unsolvable,broken,extraneous; "
        "their metrics join the summary (docs/planning.md)",
    )


def _add_skip_malformed(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--skip-malformed",
        action="store_true",
        help="leave out malformed lines of episodes.jsonl (listed in summary.json) instead of stopping",
    )
    parser.add_argument(
        "--heatmap-formats",
        nargs="+",
        choices=HEATMAP_FORMATS,
        default=list(DEFAULT_HEATMAP_FORMATS),
        metavar="FORMAT",
        help=f"heatmap files to write, of {', '.join(HEATMAP_FORMATS)} (default png; pdf and svg are vector, "
        "for papers, and take longer)",
    )


def _probability(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{text} is not a probability in [0, 1]")
    return value


def dataset_sources(dataset: str, domains: Sequence[str] | None) -> dict[str, tuple[str, Dataset]]:
    """For each domain: (dataset string stored in episode keys, loaded dataset).

    ``dataset`` is a bundled name, one dataset file (only its own domain is used) or a folder
    holding ``<domain>_dataset_*`` files (one per domain, as ``ace-gym generate`` writes them).
    ``domains`` None (``--domains all``) is every domain: of a folder, those it holds files of.
    """
    path = Path(dataset)
    try:
        is_dir, is_file = path.is_dir(), path.is_file()
    except OSError:  # e.g. a name too long for the system: resolve_dataset names the problem
        is_dir = is_file = False
    if is_dir:
        names = sorted(p.name for p in path.iterdir())
        if domains is None:
            domains = [d for d in DOMAIN_NAMES if any(name.startswith(f"{d}_dataset_") for name in names)]
            if not domains:
                raise ConfigError("dataset", dataset, "holds no <domain>_dataset_* file (as ace-gym generate writes)")
        found = {}
        for domain in domains:
            files = [path / name for name in names if name.startswith(f"{domain}_dataset_")]
            if len(files) != 1:
                raise ConfigError("dataset", dataset, f"needs exactly one {domain}_dataset_* file, found {len(files)}")
            found[domain] = (str(files[0].resolve()), load_dataset(files[0]))
        return found
    if is_file:
        loaded = load_dataset(path)
        if domains is not None and loaded.domain.name not in domains:
            raise ConfigError("domains", list(domains), f"{dataset} holds domain {loaded.domain.name!r} only")
        return {loaded.domain.name: (str(path.resolve()), loaded)}
    return {
        domain: (dataset, resolve_dataset(dataset, domain)) for domain in (DOMAIN_NAMES if domains is None else domains)
    }


def env_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`~ace_gym.envs.AceEnv` keyword arguments (tool budgets) the flags of :func:`add_env_flags` ask for."""
    return {
        "extra_query_num": args.extra_query_num,
        "global_check_alpha": args.global_check_alpha,
        "check_include_reason": args.check_include_reason,
        "max_query_ids": args.max_query_ids,
        "max_query_fields": args.max_query_fields,
    }


def build_specs(args: argparse.Namespace) -> list[EpisodeSpec]:
    """Every episode the eval flags select: :func:`dataset_specs` of their values."""
    return dataset_specs(
        **shared_selection(args),
        tool_failure_rates=args.tool_failure_rates,
        trials=args.trials,
        failure_injection=_failure_injection(args),
        protocol=episode_options(args),
    )


def episode_options(args: argparse.Namespace) -> dict[str, Any]:
    """The episode-spec fields the benchmarks' ``eval`` flags ask for (:meth:`~ace_gym.benchmark.Benchmark.episode_options_of`)."""
    return {name: value for benchmark in BENCHMARKS for name, value in benchmark.episode_options_of(args).items()}


def shared_selection(args: argparse.Namespace) -> dict[str, Any]:
    """The :func:`dataset_specs` arguments of the flags ``eval`` and ``tokens`` share (the
    dataset, its selection, the seed and :func:`add_env_flags`)."""
    return {
        "dataset": args.dataset,
        "domains": None if args.domains == ["all"] else args.domains,
        "hidden_slots": args.hidden_slots,
        "decoy_budgets": args.decoy_budgets,
        "seed": args.seed,
        "env_kwargs": env_kwargs(args),
        "max_turns": args.max_turns,
        "wrappers": args.wrappers,
    }


def dataset_specs(
    dataset: str,
    domains: Sequence[str] | None,
    *,
    hidden_slots: Sequence[int] | None = None,
    decoy_budgets: Sequence[int] | None = None,
    seed: int = 0,
    env_kwargs: Mapping[str, Any] | None = None,
    max_turns: int | None = None,
    wrappers: Sequence[str] = (),
    tool_failure_rates: Sequence[float] = (0.0,),
    trials: int = 1,
    failure_injection: Mapping[str, Any] | None = None,
    protocol: Mapping[str, Any] | None = None,
) -> list[EpisodeSpec]:
    """Every episode of ``dataset`` (a name or a file; ``domains`` None = all) whose instances
    have one of ``hidden_slots`` and ``decoy_budgets`` (None = any), in (domain, instance, rate,
    trial) order, each with the given spec fields (``protocol``: the benchmarks' episode options,
    :func:`episode_options`). ConfigError when a hidden-slot or decoy-budget value is in none
    of the datasets, or nothing is selected (the message names the values the datasets hold)."""
    integer("trials", trials, minimum=1)
    sources = dataset_sources(dataset, None if domains is None else resolve_domains(domains))
    instances = [instance for _, loaded in sources.values() for instance in loaded]
    held = {
        "hidden-slots": sorted({i.meta.hidden_slots for i in instances}),
        "decoy-budgets": sorted({i.meta.branch_budget for i in instances}),
    }
    wanted = {"hidden-slots": hidden_slots, "decoy-budgets": decoy_budgets}
    holds = f"{dataset} ({', '.join(sources)}) holds " + " and ".join(
        f"{name.replace('-', ' ')} {', '.join(map(str, values)) or 'nothing'}" for name, values in held.items()
    )
    for name, values in wanted.items():
        missing = sorted(set(values or ()) - set(held[name]))
        if missing:
            raise ConfigError(name, values, f"{', '.join(map(str, missing))} selects no episode: {holds}")
    settings = setting_names(wrappers, "wrappers")
    specs = []
    for domain, (source, loaded) in sources.items():
        for index, instance in enumerate(loaded):
            if hidden_slots is not None and instance.meta.hidden_slots not in hidden_slots:
                continue
            if decoy_budgets is not None and instance.meta.branch_budget not in decoy_budgets:
                continue
            for rate in tool_failure_rates:
                for trial in range(trials):
                    specs.append(
                        EpisodeSpec.of(
                            domain,
                            source,
                            instance_index=index,
                            instance_id=instance.instance_id,
                            seed=seed,
                            trial=trial,
                            tool_failure_rate=rate,
                            env_kwargs=dict(env_kwargs or {}),
                            max_turns=max_turns,
                            settings=settings,
                            failure_injection=None if failure_injection is None else dict(failure_injection),
                            **dict(protocol or {}),
                        )
                    )
    if not specs:
        raise ConfigError("selection", {k: v for k, v in wanted.items() if v}, f"selects no episode: {holds}")
    return specs


def run_identity(args: argparse.Namespace, label: str) -> dict[str, Any]:
    """What makes an output directory one ACE run: policy, dataset, settings and ace-gym version."""
    path = Path(args.dataset)
    return {
        "policy": label,
        "dataset": str(path.resolve()) if path.exists() else args.dataset,
        "settings": {
            **env_kwargs(args),
            "max_turns": args.max_turns,
            "seed": args.seed,
            **({"wrappers": list(setting_names(args.wrappers, "wrappers"))} if args.wrappers else {}),
            **{name: value for name, value in episode_options(args).items() if value is not None},
            **({"failure_injection": _failure_injection(args)} if args.failure_modes else {}),
            # failures drawn per episode since issue 40: a run drawn from the seed alone is another run
            **({"failure_draws": "episode"} if any(rate > 0 for rate in args.tool_failure_rates) else {}),
            # episode keys name the stack since issue 41: a run keyed before is another run
            "episode_keys": "stack",
        },
        "ace_gym_version": __version__,
    }


def _failure_injection(args: argparse.Namespace) -> dict[str, Any] | None:
    """The failure-injection options ``--failure-modes`` asks for (None: the published failure);
    ConfigError for an unknown mode."""
    if not args.failure_modes:
        return None
    for mode in args.failure_modes:
        choice("failure-modes", mode, tuple(FAILURE_ENVELOPES))
    return {"failure_modes": list(args.failure_modes)}


def _option(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ConfigError("engine-option", text, "must be KEY=VALUE")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


ACE_REPORT = Report(summarize, format_table, write_heatmaps)
"""The report of an ACE run: the summary with the benchmarks' metrics, the table with theirs, heatmaps."""


def _ace_evaluation(args: argparse.Namespace, label: str) -> Evaluation:
    specs = build_specs(args)
    rollout = run_episodes
    if args.env_url:
        from ace_gym.eval.remote import RemoteStackFactory

        rollout = partial(run_episodes, make_env=RemoteStackFactory(args.env_url))
    return Evaluation(
        items=list(specs),
        key=lambda spec: spec.key(label),
        rollout=rollout,
        run=run_identity(args, label),
        refuse_mixing=partial(_refuse_mixing, label=label, specs=specs),
        report=ACE_REPORT,
        default_batch_size=lambda policy: 32 if is_engine_spec(policy) else 1,
    )


def _evaluation(args: argparse.Namespace, label: str) -> Evaluation:
    """The evaluation of the first benchmark whose flags ask for one of its own, else the ACE evaluation."""
    for benchmark in BENCHMARKS:
        evaluation = benchmark.evaluation_of(args, label)
        if evaluation is not None:
            return evaluation
    return _ace_evaluation(args, label)


def run_eval(args: argparse.Namespace) -> int:
    if args.backend != "ray" and (args.address is not None or args.ray_workers is not None):
        raise ConfigError("backend", args.backend, "--address and --ray-workers need --backend ray")
    engine_options = dict(_option(text) for text in args.engine_option)
    label = policy_label(args.policy, engine_options)
    evaluation = _evaluation(args, label)
    out = output_directory(args.out)
    with EpisodeLog(out / EPISODES_FILE, skip_malformed=args.skip_malformed) as log:
        # a new run, one from before runs had an identity, or one refused before it stored an
        # episode (a missing extra, a dead endpoint or env server): this run takes the folder
        if _stored_run(out) is None or not log.keys:
            evaluation.refuse_mixing(log.path)
            summary = _summary(out, evaluation.run, evaluation.report, args.skip_malformed)
            write_json_atomic(out / SUMMARY_FILE, summary)  # records the identity
        else:
            _refuse_other_run(out, evaluation.run)
        pending = [item for item in evaluation.items if evaluation.key(item) not in log.keys]
        skipped = len(evaluation.items) - len(pending)
        if skipped:
            print(f"resuming: {skipped} of {len(evaluation.items)} episodes already in {log.path}", file=sys.stderr)
        if pending:  # a finished run only rebuilds its report: no model is loaded
            _run_pending(
                args, evaluation, pending, partial(make_policy, args.policy, **engine_options), label, log, skipped
            )
        return _write_report(out, evaluation.run, args.skip_malformed, args.heatmap_formats, not args.no_progress)


def _run_pending(
    args: argparse.Namespace,
    evaluation: Evaluation,
    pending: list[Any],
    build_policy: Callable[[], Any],
    label: str,
    log: EpisodeLog,
    skipped: int,
) -> None:
    batch_size = args.batch_size or evaluation.default_batch_size(args.policy)
    solved = 0.0
    policy = None
    if args.backend == "ray":
        from ace_gym.eval.ray_backend import run_on_ray

        records = run_on_ray(
            pending,
            evaluation.key,
            evaluation.rollout,
            build_policy,
            name=label,
            batch_size=batch_size,
            workers=args.ray_workers,
            address=args.address,
        )
    else:
        policy = build_policy()
        records = evaluation.rollout(pending, policy, batch_size=batch_size, name=label)
    with progress_bar(len(pending) + skipped, "eval", "ep", not args.no_progress, initial=skipped) as bar:
        try:
            for done, record in enumerate(records, 1):
                log.append(record)
                solved += float(record["score"] or 0.0)
                bar.set_postfix_str(f"score {solved / done:.3f}", refresh=False)
                bar.update()
        finally:
            close = getattr(policy, "close", None)
            if callable(close):  # e.g. an HTTP client pool
                close()


def _stored_run(out: Path) -> dict[str, Any] | None:
    """The run identity recorded in ``out/summary.json``, or None (no file, or none recorded; a
    file that is not a JSON object is ignored with a warning). A summary that is no regular file
    (a FIFO, a device) or holds more than :data:`~ace_gym.runs.results.MAX_SUMMARY_BYTES` raises OSError, never waits."""
    try:
        stored = json.loads(read_regular_file(out / SUMMARY_FILE, MAX_SUMMARY_BYTES)).get("run")
    except FileNotFoundError:
        return None
    except (ValueError, AttributeError, RecursionError):
        logger.warning("%s is not a JSON object: ignoring it", out / SUMMARY_FILE)
        return None
    return stored if isinstance(stored, dict) else None


def _refuse_other_run(out: Path, run: dict[str, Any]) -> None:
    """ConfigError naming every difference between ``run`` and the run ``out`` holds."""
    stored = _stored_run(out) or {}
    flat = {**run, **run["settings"]}
    stored_flat = {**stored, **(stored.get("settings") or {})}
    differences = [
        f"{name} {stored_flat.get(name)!r} (this eval: {value!r})"
        for name, value in flat.items()
        if name != "settings" and stored_flat.get(name) != value
    ]
    if differences:
        raise ConfigError(
            "out",
            str(out),
            f"holds another run: {'; '.join(differences)}. Use another --out, or repeat the run's settings",
        )


def _refuse_mixing(path: Path, label: str, specs: Sequence[EpisodeSpec]) -> None:
    """For a directory without a recorded run identity: its records must be of this policy,
    configuration and (per domain) dataset."""
    stacks = {f"|{spec.stack.key()}" for spec in specs}
    datasets = {spec.domain: spec.dataset for spec in specs}
    for record in read_records(path, skipped=[]):
        if record.get("policy") != label:
            raise ConfigError("out", str(path.parent), f"holds episodes of another policy ({record.get('policy')})")
        if not any(str(record.get("key", "")).endswith(stack) for stack in stacks):
            raise ConfigError("out", str(path.parent), "holds episodes run with other budgets, max turns or wrappers")
        if datasets.get(record["domain"], record.get("dataset")) != record.get("dataset"):
            raise ConfigError("out", str(path.parent), f"holds episodes of dataset {record.get('dataset')}")


def run_report(args: argparse.Namespace) -> int:
    if not (args.dir / EPISODES_FILE).exists():
        raise ConfigError("dir", str(args.dir), f"holds no {EPISODES_FILE}")
    return _write_report(args.dir, _stored_run(args.dir), args.skip_malformed, args.heatmap_formats, True)


def _report_of(out: Path, run: dict[str, Any] | None, skip_malformed: bool) -> Report:
    """The report of the run in ``out``: the report of the benchmark whose run it is, by its
    identity, else by its first record; else the ACE report."""
    first = None
    if run is None:
        skipped: list[int] | None = [] if skip_malformed else None
        first = next(iter(read_records(out / EPISODES_FILE, skipped=skipped)), None)
    for benchmark in BENCHMARKS:
        report = benchmark.report_of(run, first)
        if report is not None:
            return report
    return ACE_REPORT


def _summary(out: Path, run: dict[str, Any] | None, report: Report, skip_malformed: bool) -> dict[str, Any]:
    """The summary of ``out/episodes.jsonl``, with the run identity and any skipped line numbers."""
    skipped: list[int] | None = [] if skip_malformed else None
    summary = {"run": run, **report.summarize(read_records(out / EPISODES_FILE, skipped=skipped))}
    if run is not None and summary["policy"] is None:  # no episode yet
        summary["policy"] = run["policy"]
    if skipped:
        summary["skipped_lines"] = skipped
    return summary


def _write_report(
    out: Path, run: dict[str, Any] | None, skip_malformed: bool, heatmap_formats: Sequence[str], progress: bool
) -> int:
    """summary.json, heatmaps (in ``heatmap_formats``; a line on stderr says so when ``progress``)
    and the printed table from ``out/episodes.jsonl``, after removing the temporary files of a
    report that was killed while writing them."""
    for name_prefix in (SUMMARY_FILE, "heatmap_"):
        remove_stale_temporaries(out, name_prefix)
    report = _report_of(out, run, skip_malformed)
    summary = _summary(out, run, report, skip_malformed)
    if not summary["episodes"]:
        raise ConfigError("dir", str(out), f"{EPISODES_FILE} holds no episode records")
    write_json_atomic(out / SUMMARY_FILE, summary)
    if matplotlib_available():
        if progress:
            print(f"writing heatmaps ({', '.join(heatmap_formats)}) into {os.fspath(out)}", file=sys.stderr)
        report.write_heatmaps(summary, out, heatmap_formats)
    else:
        print(
            "matplotlib is not installed: no heatmaps (pip install '.[plot]' in an ace-gym checkout)", file=sys.stderr
        )
    print(report.format_table(summary))
    if summary.get("skipped_lines"):
        print(f"left out malformed lines {summary['skipped_lines']} of {EPISODES_FILE}", file=sys.stderr)
    print(f"\nresults: {os.fspath(out)}")
    return 0
