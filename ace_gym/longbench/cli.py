"""``ace-gym eval --env ALB-QA-v0``: AgentLongBench questions for an LLM policy, resumably.

Generated samples (settings x buckets x question types x ``--samples`` seeds) or, with
``--official DIR``, the rows of a local copy of the official dataset, answered by a
``vllm:``/``hf:``/``openai:`` policy. Writes the same result files as the ACE evaluation:
``DIR/episodes.jsonl`` (one record per question, appended atomically; re-running resumes),
``DIR/summary.json``, ``DIR/heatmap_<setting>.png`` (buckets x question types), and prints the
accuracy table (question type x bucket per setting). ``ace-gym report DIR`` rebuilds them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ace_gym.errors import AceGymError, ConfigError

if TYPE_CHECKING:
    from ace_gym.agents.base import ChatEngine

ENV_CHOICES = ("ALB-QA-v0",)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--env`` and the AgentLongBench options to the ``eval`` sub-command."""
    group = parser.add_argument_group("AgentLongBench (with --env ALB-QA-v0; --dataset/--domains are ignored)")
    group.add_argument("--env", default=None, choices=ENV_CHOICES, help="evaluate on this env instead of ACE datasets")
    group.add_argument("--fmt", default="concise", help="concise, verbose or a comma list")
    group.add_argument("--knowledge", default="kf", help="kf, ki or a comma list")
    group.add_argument("--table", default="synthetic", help="synthetic, ace:<domain>, pokemon or csv:<path>")
    group.add_argument("--table-seed", type=int, default=0, help="seed of a generated item table (synthetic)")
    group.add_argument("--buckets", default="32k", help="comma list of buckets (32k ... 4M) or token counts")
    group.add_argument("--question-types", default="all", help="all, or a comma list of labels or slugs")
    group.add_argument("--samples", type=int, default=2, help="questions per setting x bucket x question type")
    group.add_argument("--tokenizer", default=None, help="approx (default) or hf:<local tokenizer dir>")
    group.add_argument("--behaviour", default=None, help="investigator parameters as a JSON object")
    group.add_argument("--official", type=Path, default=None, help="answer the official dataset under this folder")
    group.add_argument("--keep-context", action="store_true", help="store the whole context in every record")


def _list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def build_specs(args: argparse.Namespace) -> list[Any]:
    """The QA specs the command selects, in (setting, bucket, question type, seed) order."""
    from ace_gym.longbench.question_types import resolve_question_types
    from ace_gym.longbench.rollout import qa_specs

    types = resolve_question_types(args.question_types)[0]
    try:
        behaviour = json.loads(args.behaviour) if args.behaviour else None
    except ValueError:
        raise ConfigError("behaviour", args.behaviour, "must be a JSON object") from None
    buckets: list[int | str] = [int(b) if b.isdigit() else b for b in _list(args.buckets)]
    specs = []
    for knowledge in _list(args.knowledge):
        for fmt in _list(args.fmt):
            env_kwargs: dict[str, Any] = {
                "fmt": fmt,
                "knowledge": knowledge,
                "table": args.table,
                "table_seed": args.table_seed,
            }
            if args.tokenizer:
                env_kwargs["tokenizer"] = args.tokenizer
            if behaviour is not None:
                env_kwargs["behaviour"] = behaviour
            specs += qa_specs(env_kwargs, question_types=types, buckets=buckets, samples=args.samples, seed=args.seed)
    return specs


def run_eval(args: argparse.Namespace) -> int:
    """The ``eval`` handler for ``--env ALB-QA-v0`` (exit code)."""
    from ace_gym.cli import progress_bar
    from ace_gym.eval import cli as eval_cli
    from ace_gym.eval.results import EPISODES_FILE, EpisodeLog, read_records
    from ace_gym.longbench.official import load_official
    from ace_gym.longbench.rollout import official_key, run_official_rows, run_qa_episodes

    try:
        if args.policy.partition(":")[0] not in eval_cli.LLM_PREFIXES:
            raise ConfigError(
                "policy", args.policy, "ALB-QA-v0 needs an LLM policy: vllm:PATH, hf:PATH or openai:MODEL@URL"
            )
        label, engine_options = eval_cli.policy_label(args.policy, args.engine_option)
        out: Path = args.out
        with EpisodeLog(out / EPISODES_FILE) as log:
            for record in read_records(log.path):
                if record.get("policy") != label or "question_type" not in record:
                    raise ConfigError("out", str(out), f"holds episodes of another run ({record.get('policy')})")
            if args.official is not None:
                rows = list(load_official(args.official))
                items: list[Any] = [row for row in rows if official_key(label, row) not in log.keys]
                total = len(rows)
            else:
                specs = build_specs(args)
                items = [spec for spec in specs if spec.key(label) not in log.keys]
                total = len(specs)
            if len(items) < total:
                print(f"resuming: {total - len(items)} of {total} questions already in {log.path}", file=sys.stderr)
            if items:  # a finished run only rebuilds its report: no model is loaded
                engine = cast("ChatEngine", eval_cli.make_policy(args.policy, engine_options))
                run = run_official_rows if args.official is not None else run_qa_episodes
                done = total - len(items)
                try:
                    with progress_bar(total, "eval", "q", not args.no_progress, initial=done) as bar:
                        for record in run(
                            items, engine, batch_size=args.batch_size or 8, name=label, keep_context=args.keep_context
                        ):
                            log.append(record)
                            bar.update()
                finally:
                    close = getattr(engine, "close", None)
                    if callable(close):
                        close()
    except AceGymError as error:
        print(f"ace-gym eval: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted: finished questions are saved; re-run the same command to resume", file=sys.stderr)
        return 130
    return write_report(out)


def is_alb_run(out: Path) -> bool:
    """Whether ``out/episodes.jsonl`` holds AgentLongBench records (judged by its first record)."""
    from ace_gym.eval.results import EPISODES_FILE, read_records
    from ace_gym.longbench.report import is_alb_record

    first = next(iter(read_records(out / EPISODES_FILE)), None)
    return first is not None and is_alb_record(first)


def write_report(out: Path) -> int:
    """summary.json, heatmaps and the printed table from ``out/episodes.jsonl``."""
    from ace_gym.eval.plots import matplotlib_available
    from ace_gym.eval.results import EPISODES_FILE, SUMMARY_FILE, read_records, write_json_atomic
    from ace_gym.longbench.report import format_alb_table, summarize_alb, write_alb_heatmaps

    summary = summarize_alb(read_records(out / EPISODES_FILE))
    write_json_atomic(out / SUMMARY_FILE, summary)
    if matplotlib_available():
        write_alb_heatmaps(summary, out)
    else:
        print("matplotlib is not installed: no heatmaps (pip install 'ace-gym[plot]')", file=sys.stderr)
    print(format_alb_table(summary))
    print(f"\nresults: {os.fspath(out)}")
    return 0
