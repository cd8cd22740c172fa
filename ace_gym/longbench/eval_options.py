"""``ace-gym eval --env ALB-QA-v0``: what AgentLongBench adds to the ``eval`` command (no command
of its own).

Generated samples (settings x buckets x question types x ``--samples`` seeds) or, with
``--official DIR``, the rows of a local copy of the official dataset, answered by a
``vllm:``/``hf:``/``openai:`` policy. This module holds the options, the selection, the run
identity, the check of directories without one (:func:`evaluation`) and the report
(:func:`report`), which the package's declaration (:mod:`ace_gym.longbench.benchmark`) names;
:mod:`ace_gym.eval.cli` runs the evaluation exactly as for ACE (lock, resume, run identity,
malformed lines, exit codes) and writes the same files: ``DIR/episodes.jsonl`` (one record per question), ``DIR/summary.json``,
``DIR/heatmap_<setting>.png`` (buckets x question types) and the accuracy table (question type x
bucket per setting). ``ace-gym report DIR`` rebuilds them.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from ace_gym.agents import is_engine_spec
from ace_gym.benchmark import Evaluation, Report
from ace_gym.errors import ConfigError
from ace_gym.longbench.official import load_official
from ace_gym.longbench.question_types import resolve_question_types
from ace_gym.longbench.report import format_alb_table, is_alb_record, summarize_alb, write_alb_heatmaps
from ace_gym.longbench.rollout import QASpec, official_key, qa_specs, run_official_rows, run_qa_episodes
from ace_gym.runs.results import read_records
from ace_gym.version import __version__

ENV_CHOICES = ("ALB-QA-v0",)
REPORT = Report(summarize_alb, format_alb_table, write_alb_heatmaps)
"""The accuracy report of an AgentLongBench run (:mod:`ace_gym.longbench.report`)."""


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


def build_specs(args: argparse.Namespace) -> list[QASpec]:
    """The QA specs the command selects, in (setting, bucket, question type, seed) order."""
    types = resolve_question_types(args.question_types)[0]
    behaviour = _behaviour(args)
    buckets: list[int | str] = [int(b) if b.isdigit() else b for b in _list(args.buckets)]
    specs = []
    for knowledge in _list(args.knowledge):
        for fmt in _list(args.fmt):
            env_kwargs: dict[str, Any] = {
                "fmt": fmt,
                "knowledge": knowledge,
                "table": args.table,
                "table_seed": args.table_seed,
                "answers": "paper",  # an evaluation asks the paper's question forms
            }
            if args.tokenizer:
                env_kwargs["tokenizer"] = args.tokenizer
            if behaviour is not None:
                env_kwargs["behaviour"] = behaviour
            specs += qa_specs(env_kwargs, question_types=types, buckets=buckets, samples=args.samples, seed=args.seed)
    return specs


def run_identity(args: argparse.Namespace, label: str) -> dict[str, Any]:
    """What makes an output directory one AgentLongBench run: policy, env, the settings that
    change every answer (table, tokenizer, investigator behaviour, official copy, seed, kept
    context) and ace-gym version. Settings, buckets, question types and samples may grow."""
    official = args.official.resolve() if args.official is not None else None
    return {
        "policy": label,
        "env": args.env,
        "settings": {
            "table": args.table,
            "table_seed": args.table_seed,
            "tokenizer": args.tokenizer,
            "behaviour": _behaviour(args),
            "official": None if official is None else str(official),
            "keep_context": args.keep_context,
            "seed": args.seed,
        },
        "ace_gym_version": __version__,
    }


def _behaviour(args: argparse.Namespace) -> Any:
    try:
        return json.loads(args.behaviour) if args.behaviour else None
    except ValueError:
        raise ConfigError("behaviour", args.behaviour, "must be a JSON object") from None


def selection(
    args: argparse.Namespace, label: str
) -> tuple[list[Any], Callable[[Any], str], Callable[..., Iterator[dict[str, Any]]]]:
    """What the command answers: (items, the key of an item, the rollout that answers them, called
    as ``rollout(items, engine, batch_size=..., name=label)``), for the rows of ``--official`` or the
    generated QA specs. ConfigError unless the policy is an LLM."""
    if not is_engine_spec(args.policy):
        raise ConfigError(
            "policy", args.policy, f"{args.env} needs an LLM policy: vllm:PATH, hf:PATH or openai:MODEL@URL"
        )
    if args.official is not None:
        rows = list(load_official(args.official))
        return rows, partial(official_key, label), partial(run_official_rows, keep_context=args.keep_context)
    specs = build_specs(args)
    return specs, lambda spec: spec.key(label), partial(run_qa_episodes, keep_context=args.keep_context)


def refuse_mixing(path: Path, label: str) -> None:
    """For a directory without a recorded run identity: its records must be this policy's answers."""
    for record in read_records(path, skipped=[]):
        if record.get("policy") != label or not is_alb_record(record):
            raise ConfigError("out", str(path.parent), f"holds episodes of another run ({record.get('policy')})")


def evaluation(args: argparse.Namespace, label: str) -> Evaluation | None:
    """The evaluation ``--env`` asks for (None without it: an ACE evaluation): the selected items,
    their keys and rollout, the run identity, the check of a directory without one, the report,
    and eight questions per batch by default."""
    if args.env is None:
        return None
    items, key, rollout = selection(args, label)
    return Evaluation(
        items=items,
        key=key,
        rollout=rollout,
        run=run_identity(args, label),
        refuse_mixing=partial(refuse_mixing, label=label),
        report=REPORT,
        default_batch_size=lambda policy: 8,
    )


def report(run: Mapping[str, Any] | None, first_record: Mapping[str, Any] | None) -> Report | None:
    """:data:`REPORT` when ``run`` is an AgentLongBench run identity (it names an ``env``), or, for
    a folder without one, when ``first_record`` is an AgentLongBench record; else None."""
    if run is not None:
        return REPORT if run.get("env") is not None else None
    return REPORT if first_record is not None and is_alb_record(first_record) else None
