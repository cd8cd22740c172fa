"""GRPO on ACE with TRL's rollout_func: ace-gym's own collector plays the episodes, every turn is trained.

Unlike ``grpo_train.py`` (TRL parses the tool calls itself), here ace-gym's collector runs each
episode through its text adapter against TRL's generation (the trained model, or TRL's vLLM
server or colocated engine with ``--use-vllm``): the model may write calls in any format the
adapter reads (Hermes, Qwen3 XML, Llama-3 JSON, Mistral, pythonic, ...), an unreadable turn gets
a corrective message and the episode goes on, budgets and injected tool failures apply as the
episode specs set them. The rollout is token-exact: the prompt ids grow by exactly the ids the
model generated and the rendered replies, and the completion holds every assistant turn with the
env's tokens masked out (``env_mask``). The reward is the episode score (``episode_score``);
``AceMetrics`` logs ``ace/score``, per-domain scores, parse errors, recovery rate and pass@k /
avg@k over the GRPO groups. The episodes are instances of the bundled 5x7 set (the published 5x5
names give the truth away, docs/training.md).

Run it as written (builds a tiny random Llama locally, two CPU steps, under a minute)::

    python examples/grpo_rollout_func.py

With a real model: ``python examples/grpo_rollout_func.py --model Qwen/Qwen3-0.6B --max-steps 500
--max-completion-length 4096 --max-turns 40`` (needs ``pip install ".[train]"``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile

from ace_gym.eval.fit import TRAINING_DATASET


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="model path or name (default: build a tiny random Llama locally)")
    parser.add_argument("--domains", default="course,meal", help="comma list of ACE domains")
    parser.add_argument("--episodes-per-domain", type=int, default=2)
    parser.add_argument("--max-steps", type=int, default=2)
    parser.add_argument("--num-generations", type=int, default=2)
    parser.add_argument("--max-completion-length", type=int, default=64, help="tokens of a whole multi-turn rollout")
    parser.add_argument("--max-turns", type=int, default=2, help="assistant turns per episode")
    parser.add_argument(
        "--max-turn-tokens", type=int, default=None, help="new tokens per turn (default: the whole budget left)"
    )
    parser.add_argument("--tool-failure-rate", type=float, default=0.0)
    parser.add_argument("--use-vllm", action="store_true", help="generate with TRL's vLLM (colocated)")
    parser.add_argument("--output-dir", default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    try:  # the train extra: imported here so that --help works without it
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from trl import GRPOConfig, GRPOTrainer

        from ace_gym.agents.llm.tiny_model import build_tiny_model
        from ace_gym.integrations.trainer_callback import validation_specs
        from ace_gym.integrations.trl import AceMetrics, episode_score, rollout_func, train_dataset
    except ImportError as error:
        sys.exit(
            f"grpo_rollout_func.py: {error.name} is missing; install it with pip install '.[train]' in an ace-gym checkout"
        )

    workdir = tempfile.mkdtemp(prefix="ace-grpo-")
    model_path = args.model or str(build_tiny_model(f"{workdir}/tiny-model", seed=args.seed))
    domains = args.domains.split(",")
    specs = validation_specs(
        domains,
        args.episodes_per_domain,
        dataset=TRAINING_DATASET,
        seed=args.seed,
        max_turns=args.max_turns,
        tool_failure_rates=(args.tool_failure_rate,),
    )
    config = GRPOConfig(
        output_dir=args.output_dir or f"{workdir}/out",
        max_steps=args.max_steps,
        per_device_train_batch_size=args.num_generations * len(domains),
        num_generations=args.num_generations,
        max_completion_length=args.max_completion_length,
        use_vllm=args.use_vllm,
        vllm_mode="colocate",
        learning_rate=1e-5,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        seed=args.seed,
        use_cpu=not torch.cuda.is_available(),
    )
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_path, dtype="auto"),
        processing_class=AutoTokenizer.from_pretrained(model_path),
        args=config,
        train_dataset=train_dataset(specs),
        rollout_func=rollout_func(specs, max_turn_tokens=args.max_turn_tokens),
        reward_funcs=[episode_score, AceMetrics()],
    )
    trainer.train()
    for entry in trainer.state.log_history:
        print(json.dumps({k: v for k, v in entry.items() if k == "step" or k.startswith(("ace/", "reward", "loss"))}))


if __name__ == "__main__":
    main()
