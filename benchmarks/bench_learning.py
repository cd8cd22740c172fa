"""A from-scratch learning run on CPU: SFT on exact-solver traces, then GRPO through the env.

Does a model trained on an ACE env get better at it? No weights can be downloaded here, so the
model starts from nothing:

1. **Data**: a small generated preset (default: course, 3x3 grid, H = 1, 4 candidates per
   slot, no decoys; ``--hidden 1 2 3`` for more), played under ``FIT`` (compact observations,
   several calls per turn); training instances from one range of generator seeds, held-out
   instances from another.
2. **Model**: the project's tiny Llama (:func:`~ace_gym.agents.llm.tiny_model.build_tiny_model`),
   its byte-level BPE trained on the ACE text and on the rendered training conversations (merges
   across words, every digit a token of its own: ``--split-digits``), with Qwen2.5's chat
   template (TRL and the chat adapter parse its ``<tool_call>`` blocks).
3. **SFT** on the batching solver's (``solver-batch``) episodes of the training instances,
   written as rollout records, exported to a HF dataset (``ace_gym.eval.export``) and tokenised
   with :class:`~ace_gym.chat_template.ChatTokens`: the loss is on assistant tokens only.
4. **GRPO** from the SFT checkpoint through TRL's ``rollout_func`` (ace-gym's collector plays
   the episodes against TRL's generation; the reward is the env's score).
5. **Evaluation** on the held-out instances (greedy decoding) before SFT, after SFT and every
   ``--grpo-eval-every`` GRPO steps: success rate, mean score, parse-error rate, mean turns and
   invalid-call rate, and the same for the greedy, random and solver-batch scripted policies on
   the same instances. ``results.json`` (every number, the settings and the seed) and
   ``learning.png`` (the curves) are written to ``--out``.

    python benchmarks/bench_learning.py --quick --out /tmp/learn-quick    # seconds: the pipeline
    python benchmarks/bench_learning.py --out runs/learning               # the CPU run of docs/benchmarks.md

Larger settings (``--hidden-size``, ``--layers``, ``--hidden``, ``--sft-steps``,
``--grpo-steps``, ``--use-vllm`` for TRL's vLLM generation) change nothing else.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ace_gym.errors import ConfigError
from ace_gym.eval import EpisodeSpec, run_episodes
from ace_gym.eval.fit import FIT, fit_spec
from ace_gym.generators import generate_dataset
from ace_gym.integrations.trainer_callback import parse_error_turn
from ace_gym.policies import make_policy
from ace_gym.runs.results import encode_json, write_json_atomic
from ace_gym.stats import aggregate, episode_fields, episode_turns, mean

METRICS = ("success_rate", "mean_score", "parse_error_rate", "mean_turns", "invalid_call_rate")
"""What every evaluation reports (see :func:`episode_metrics`)."""
BASELINES = ("greedy", "random", "solver-batch")
"""The scripted policies evaluated on the same held-out instances."""
QUICK: dict[str, Any] = {
    "train_seeds": 2,
    "heldout_seeds": 1,
    "hidden": [1],
    "vocab_size": 1024,
    "hidden_size": 64,
    "layers": 1,
    "sft_steps": 6,
    "sft_batch": 2,
    "sft_lr": 3e-3,
    "grpo_steps": 1,
    "grpo_eval_every": 1,
    "group_size": 2,
    "prompts_per_step": 1,
    "max_new_tokens": 24,
    "max_turns": 2,
    "max_completion_length": 32,
    "threads": 1,
}
"""``--quick``: the whole pipeline in seconds (it learns nothing; a test checks that it runs). One
torch thread: two are slower on a machine shared with other jobs."""


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import torch

    torch.set_num_threads(args.threads)
    train_specs, heldout_specs = make_specs(args, out)
    print(f"{len(train_specs)} training and {len(heldout_specs)} held-out instances", flush=True)

    results: dict[str, Any] = {"settings": vars(args), "stages": [], "baselines": {}}
    for name in BASELINES:
        records = list(run_episodes(heldout_specs, make_policy(name), name=name))
        results["baselines"][name] = episode_metrics(records)
        print(f"baseline {name}: {format_metrics(results['baselines'][name])}", flush=True)

    traces = out / "solver_traces.jsonl"
    write_records(traces, run_episodes(train_specs, make_policy(FIT["policy"]), name=FIT["policy"]))
    dataset = export_traces(traces, out / "sft_dataset")
    model_dir = build_model(args, out / "model_init", dataset)
    tokenizer = load_tokenizer(model_dir)
    samples = [sft_sample(row, tokenizer) for row in dataset]
    results["sft_data"] = {
        "episodes": len(samples),
        "tokens_mean": mean(len(s["input_ids"]) for s in samples),
        "tokens_max": max(len(s["input_ids"]) for s in samples),
        "assistant_tokens_mean": mean(sum(s["loss_mask"]) for s in samples),
    }
    print(f"SFT data: {results['sft_data']}", flush=True)

    model = load_model(model_dir)
    results["model"] = {"parameters": sum(p.numel() for p in model.parameters()), "vocab_size": len(tokenizer)}
    stage(results, "before SFT", 0, evaluate(model, tokenizer, heldout_specs, args), started)

    results["sft_loss"] = train_sft(model, samples, args)
    sft_dir = out / "model_sft"
    model.save_pretrained(sft_dir)
    tokenizer.save_pretrained(sft_dir)
    stage(results, "after SFT", 0, evaluate(model, tokenizer, heldout_specs, args), started)
    write_json_atomic(out / "results.json", results)

    if args.grpo_steps > 0:
        results["grpo_log"] = train_grpo(model, tokenizer, train_specs, heldout_specs, args, results, started, out)
    results["wall_s"] = round(time.perf_counter() - started, 1)
    write_json_atomic(out / "results.json", results)
    plot = write_plot(results, out / "learning.png")
    print(f"wrote {out / 'results.json'} and {plot} in {results['wall_s']} s", flush=True)
    return 0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="runs/learning", help="run folder (results.json, learning.png, models)")
    parser.add_argument("--quick", action="store_true", help="the pipeline in seconds (overrides the sizes)")
    parser.add_argument("--seed", type=int, default=0, help="model init, SFT order, GRPO sampling")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    data = parser.add_argument_group("data")
    data.add_argument("--domain", default="course")
    data.add_argument("--rows", type=int, default=3)
    data.add_argument("--cols", type=int, default=3)
    data.add_argument("--hidden", type=int, nargs="+", default=[1], help="hidden-slot counts H")
    data.add_argument("--candidates", type=int, default=4, help="candidates per slot")
    data.add_argument("--train-seeds", type=int, default=600, help="generator seeds for training (one instance per H)")
    data.add_argument("--heldout-seeds", type=int, default=20, help="generator seeds held out for evaluation")
    data.add_argument("--max-turns", type=int, default=4, help="turn limit of every episode")
    model = parser.add_argument_group("model")
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
    model.add_argument("--hidden-size", type=int, default=256)
    model.add_argument("--layers", type=int, default=2)
    sft = parser.add_argument_group("SFT")
    sft.add_argument("--sft-steps", type=int, default=400)
    sft.add_argument("--sft-batch", type=int, default=8)
    sft.add_argument("--sft-lr", type=float, default=3e-3)
    grpo = parser.add_argument_group("GRPO")
    grpo.add_argument("--grpo-steps", type=int, default=4, help="0: stop after SFT")
    grpo.add_argument("--grpo-eval-every", type=int, default=2)
    grpo.add_argument("--grpo-lr", type=float, default=1e-4)
    grpo.add_argument("--group-size", type=int, default=4, help="generations per prompt (GRPO group)")
    grpo.add_argument("--prompts-per-step", type=int, default=2)
    grpo.add_argument("--beta", type=float, default=0.0, help="KL coefficient")
    grpo.add_argument("--temperature", type=float, default=1.0, help="GRPO sampling temperature")
    grpo.add_argument(
        "--max-completion-length", type=int, default=128, help="per GRPO episode, and per turn while generating"
    )
    grpo.add_argument("--use-vllm", action="store_true", help="TRL's vLLM generation (colocated)")
    parser.add_argument("--max-new-tokens", type=int, default=48, help="per assistant turn")
    args = parser.parse_args(argv)
    if args.quick:
        for name, value in QUICK.items():
            setattr(args, name, value)
    return args


def make_specs(args: argparse.Namespace, out: Path) -> tuple[list[EpisodeSpec], list[EpisodeSpec]]:
    """The training and held-out episodes: one generated dataset file each (generator seeds
    ``0..train_seeds-1`` and ``10_000..``), every instance played under ``FIT``."""
    splits = {"train": range(args.train_seeds), "heldout": range(10_000, 10_000 + args.heldout_seeds)}
    specs = {}
    for split, seeds in splits.items():
        path = out / f"{args.domain}_{split}.json"
        count = write_dataset(path, args, seeds)
        specs[split] = [
            fit_spec(EpisodeSpec(args.domain, dataset=str(path), instance_index=i, max_turns=args.max_turns))
            for i in range(count)
        ]
    return specs["train"], specs["heldout"]


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


def build_model(args: argparse.Namespace, path: Path, dataset: Any) -> Path:
    """The tiny model, its tokenizer trained on the ACE text and the training conversations."""
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
    )


def _byte_tokenizer() -> Any:
    """A tokenizer that only renders templates (its ids are never used)."""
    from tokenizers import Tokenizer, models

    return Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>"))


def load_tokenizer(path: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def load_model(path: Path) -> Any:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path)


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


def train_sft(model: Any, samples: Sequence[Mapping[str, list[int]]], args: argparse.Namespace) -> list[float]:
    """Next-token cross-entropy on the assistant tokens, AdamW with linear warm-up and cosine
    decay; the batches drawn from a generator seeded with ``args.seed``. Returns each step's loss."""
    import torch

    rng = np.random.default_rng([args.seed, 1])
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.sft_lr, weight_decay=0.0)
    warmup = max(1, args.sft_steps // 10)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, args.sft_steps - warmup)))

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    pad = model.config.pad_token_id
    losses = []
    model.train()
    for step in range(args.sft_steps):
        batch = [samples[i] for i in rng.choice(len(samples), size=min(args.sft_batch, len(samples)), replace=False)]
        width = max(len(s["input_ids"]) for s in batch)
        ids = torch.tensor([s["input_ids"] + [pad] * (width - len(s["input_ids"])) for s in batch])
        mask = torch.tensor([s["loss_mask"] + [0] * (width - len(s["loss_mask"])) for s in batch])
        attention = torch.tensor([[1] * len(s["input_ids"]) + [0] * (width - len(s["input_ids"])) for s in batch])
        labels = ids.masked_fill(mask == 0, -100)
        loss = model(input_ids=ids, attention_mask=attention, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(round(loss.item(), 4))
        if step % 10 == 0 or step == args.sft_steps - 1:
            print(f"SFT step {step + 1}/{args.sft_steps}: loss {losses[-1]}", flush=True)
    model.eval()
    return losses


def evaluate(model: Any, tokenizer: Any, specs: Sequence[EpisodeSpec], args: argparse.Namespace) -> dict[str, Any]:
    """The model's :func:`episode_metrics` on ``specs``, greedy decoding."""
    from ace_gym.agents.llm.hf_engine import HFChatEngine

    engine = HFChatEngine(
        model, tokenizer, max_new_tokens=args.max_new_tokens, temperature=0.0, batch_size=len(specs), logprobs=False
    )
    return episode_metrics(list(run_episodes(specs, engine, batch_size=len(specs), name="model")))


def episode_metrics(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``success_rate``: share of episodes solved (score 1); ``mean_score``: the published
    aggregate of the scores (:func:`ace_gym.stats.aggregate`: mean over (H, B) cells);
    ``parse_error_rate``: share of turns the adapter could not read as tool calls
    (:func:`~ace_gym.integrations.trainer_callback.parse_error_turn`); ``mean_turns``: policy
    turns per episode; ``invalid_call_rate``: share of executed tool calls the env refused
    (``ok`` false: bad arguments, a fixed cell, an unknown id, ...)."""
    turns = [turn for record in records for turn in record["turns"]]
    calls = [call for turn in turns for call in turn.get("info", {}).get("calls", ())]
    return {
        "episodes": len(records),
        "success_rate": mean(float(record["score"]) >= 1.0 for record in records),
        "mean_score": aggregate(episode_fields(record) for record in records)["score"],
        "parse_error_rate": mean(parse_error_turn(turn) for turn in turns),
        "mean_turns": mean(episode_turns(record) for record in records),
        "invalid_call_rate": mean(not call.get("ok", True) for call in calls),
        "tool_calls": len(calls),
    }


def format_metrics(metrics: Mapping[str, Any]) -> str:
    return ", ".join(f"{name} {metrics[name]:.3f}" for name in METRICS)


def stage(results: dict[str, Any], name: str, grpo_step: int, metrics: dict[str, Any], started: float) -> None:
    results["stages"].append(
        {"stage": name, "grpo_step": grpo_step, "elapsed_s": round(time.perf_counter() - started, 1), **metrics}
    )
    print(f"{name}: {format_metrics(metrics)}", flush=True)


def train_grpo(
    model: Any,
    tokenizer: Any,
    train_specs: Sequence[EpisodeSpec],
    heldout_specs: Sequence[EpisodeSpec],
    args: argparse.Namespace,
    results: dict[str, Any],
    started: float,
    out: Path,
) -> list[dict[str, Any]]:
    """GRPO through TRL's ``rollout_func`` from the SFT weights, the env's score the reward;
    evaluates every ``grpo_eval_every`` steps. Returns TRL's log history."""
    import os

    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from ace_gym.integrations.trl import AceMetrics, episode_score, rollout_func, train_dataset

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

    class Evaluation(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, _args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step % args.grpo_eval_every == 0 or state.global_step == args.grpo_steps:
                metrics = evaluate(kwargs["model"], tokenizer, heldout_specs, args)
                stage(results, f"GRPO step {state.global_step}", state.global_step, metrics, started)
                write_json_atomic(out / "results.json", results)  # partial results survive an interrupted run
                kwargs["model"].train()

    config = GRPOConfig(
        output_dir=str(out / "grpo"),
        max_steps=args.grpo_steps,
        per_device_train_batch_size=args.group_size * args.prompts_per_step,
        num_generations=args.group_size,
        learning_rate=args.grpo_lr,
        beta=args.beta,
        temperature=args.temperature,
        max_completion_length=args.max_completion_length,
        use_vllm=args.use_vllm,
        vllm_mode="colocate",
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        use_cpu=not args.use_vllm,
        seed=args.seed,
        data_seed=args.seed,
    )
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=config,
        train_dataset=train_dataset(train_specs),
        reward_funcs=[episode_score, AceMetrics()],
        rollout_func=rollout_func(train_specs),
        callbacks=[Evaluation()],
    )
    trainer.train()
    model.eval()
    return [dict(entry) for entry in trainer.state.log_history]


def write_plot(results: Mapping[str, Any], path: Path) -> Path:
    """Two panels: the SFT loss per step; each metric per stage with the baselines' success rates."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from ace_gym.atomic import write_atomic

    figure = Figure(figsize=(10, 3.8), layout="constrained")
    FigureCanvasAgg(figure)
    loss_axes, stage_axes = figure.subplots(1, 2, width_ratios=[1, 1.6])
    losses = results["sft_loss"]
    loss_axes.plot(range(1, len(losses) + 1), losses, color="tab:gray")
    loss_axes.set_xlabel("SFT step")
    loss_axes.set_ylabel("loss (assistant tokens)")
    loss_axes.set_yscale("log")
    loss_axes.set_title("SFT on solver-batch traces")
    stages = results["stages"]
    positions = range(len(stages))
    for name, colour in zip(
        ("success_rate", "parse_error_rate", "invalid_call_rate"), ("tab:blue", "tab:red", "tab:orange"), strict=True
    ):
        stage_axes.plot(positions, [s[name] for s in stages], marker="o", color=colour, label=name.replace("_", " "))
    for name, style in (("greedy", "--"), ("random", ":")):
        rate = results["baselines"][name]["success_rate"]
        stage_axes.axhline(rate, color="tab:blue", linestyle=style, linewidth=1, label=f"{name} success")
    stage_axes.set_xticks(list(positions), [s["stage"].replace("GRPO step", "GRPO") for s in stages], rotation=30)
    stage_axes.set_ylim(-0.03, 1.03)
    held_out = stages[0]["episodes"]
    stage_axes.set_title(f"held-out instances ({held_out} episodes, greedy decoding)")
    stage_axes.legend(fontsize=7, loc="center right")
    write_atomic(path, lambda handle: figure.savefig(handle, format="png", dpi=80))
    return path


if __name__ == "__main__":
    raise SystemExit(main())
