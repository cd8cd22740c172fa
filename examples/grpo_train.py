"""GRPO on ACE with TRL: the reward of a completion is the score of an ACE episode it starts.

Each training prompt is the opening of an ACE episode (system prompt + partial grid, with the
domain's tool schemas rendered by the model's chat template). GRPO samples a group of
completions per prompt; the reward function plays each completion as the first assistant turn of
that same episode (same instance, same seed) through the text-action adapter, lets the live
policy play the remaining turns (up to ``--max-turns``), and returns the episode's score (0/1)
plus a small format term: ``--format-weight`` x the share of turns the adapter could read. The
gradient flows through the first turn only (the later turns are sampled under no_grad);
multi-turn credit assignment is left to the trainer of your choice.

An ``AceEvalCallback`` scores the live model on a fixed validation slice every ``--eval-every``
steps and logs ``ace/score`` and friends next to the GRPO metrics.

Run it as written (builds a tiny random Llama locally, three CPU steps, about half a minute)::

    python examples/grpo_train.py

With a real model: ``python examples/grpo_train.py --model Qwen/Qwen2.5-0.5B-Instruct
--max-steps 500 --max-turns 30 --max-completion-length 512`` (needs ``pip install
"ace-gym[train]"``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from typing import Any

import numpy as np

from ace_gym.agents.llm.hf_engine import HFChatEngine
from ace_gym.agents.llm.messages import for_chat_template
from ace_gym.eval import EpisodeSpec


def episode_prompts(specs: list[EpisodeSpec], tokenizer: Any) -> Any:
    """One row per episode (a ``datasets.Dataset``): the rendered opening prompt and what
    identifies the episode."""
    from datasets import Dataset

    rows: dict[str, list[Any]] = {"prompt": [], "domain": [], "instance_index": [], "seed": []}
    for spec in specs:
        messages, info = spec.make_env().reset(seed=spec.seed, options=spec.reset_options())
        prompt = tokenizer.apply_chat_template(
            for_chat_template(messages), tools=info["tools"], add_generation_prompt=True, tokenize=False
        )
        rows["prompt"].append(prompt)
        rows["domain"].append(spec.domain)
        rows["instance_index"].append(spec.instance_index)
        rows["seed"].append(spec.seed)
    return Dataset.from_dict(rows)


class AceRolloutReward:
    """Reward function: finish the episode each completion starts, return score + format term."""

    __name__ = "ace_rollout"  # TRL logs rewards under the function's name

    def __init__(self, tokenizer: Any, max_turns: int, format_weight: float, max_new_tokens: int, seed: int) -> None:
        self.tokenizer = tokenizer
        self.max_turns = max_turns
        self.format_weight = format_weight
        self.max_new_tokens = max_new_tokens
        self.rng = np.random.default_rng(seed)
        self.model: Any = None  # the live policy, set once the trainer exists

    def __call__(
        self,
        prompts: list[str],
        completions: list[str],
        domain: list[str],
        instance_index: list[int],
        seed: list[int],
        **_: Any,
    ) -> list[float]:
        from ace_gym.integrations.trainer_callback import parse_error_turn

        specs = [
            EpisodeSpec(d, instance_index=i, seed=s, max_turns=self.max_turns)
            for d, i, s in zip(domain, instance_index, seed, strict=True)
        ]
        envs = [spec.make_env() for spec in specs]
        tools = [
            env.reset(seed=spec.seed, options=spec.reset_options())[1]["tools"]
            for env, spec in zip(envs, specs, strict=True)
        ]
        engine = HFChatEngine(
            self.model, self.tokenizer, max_new_tokens=self.max_new_tokens, seed=int(self.rng.integers(2**31))
        )
        actions: list[Any] = list(completions)
        scores = [0.0] * len(envs)
        readable: list[list[bool]] = [[] for _ in envs]
        active = list(range(len(envs)))
        while active:
            still_active = []
            for k, action in zip(active, actions, strict=True):
                _, _, terminated, truncated, info = envs[k].step(action)
                readable[k].append(not parse_error_turn({"info": info}))
                if terminated or truncated:
                    scores[k] = float(bool(info.get("score", False)))
                else:
                    still_active.append(k)
            active = still_active
            if active:
                conversations = [envs[k].get_wrapper_attr("messages") for k in active]
                completions_now = engine.generate(conversations, [tools[k] for k in active])
                actions = [completion.text for completion in completions_now]
        for env in envs:
            env.close()
        return [score + self.format_weight * float(np.mean(ok)) for score, ok in zip(scores, readable, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="model path or name (default: build a tiny random Llama locally)")
    parser.add_argument("--domains", default="course,meal", help="comma list of ACE domains")
    parser.add_argument("--episodes-per-domain", type=int, default=4)
    parser.add_argument("--max-steps", type=int, default=3)
    parser.add_argument("--num-generations", type=int, default=4)
    parser.add_argument("--max-completion-length", type=int, default=24)
    parser.add_argument("--max-turns", type=int, default=2)
    parser.add_argument("--format-weight", type=float, default=0.1)
    parser.add_argument("--eval-every", type=int, default=2)
    parser.add_argument("--output-dir", default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    try:  # the train extra: imported here so that --help works without it
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from trl import GRPOConfig, GRPOTrainer

        from ace_gym.agents.llm.tiny_model import build_tiny_model
        from ace_gym.integrations.trainer_callback import AceEvalCallback, validation_specs
    except ImportError as error:
        sys.exit(f"grpo_train.py: {error.name} is missing; install it with pip install 'ace-gym[train]'")

    workdir = tempfile.mkdtemp(prefix="ace-grpo-")
    model_path = args.model or str(build_tiny_model(f"{workdir}/tiny-model", seed=args.seed))
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype="auto")
    domains = args.domains.split(",")
    specs = validation_specs(domains, args.episodes_per_domain, seed=args.seed, max_turns=args.max_turns)
    reward = AceRolloutReward(tokenizer, args.max_turns, args.format_weight, args.max_completion_length, args.seed)
    config = GRPOConfig(
        output_dir=args.output_dir or f"{workdir}/out",
        max_steps=args.max_steps,
        per_device_train_batch_size=args.num_generations,
        num_generations=args.num_generations,
        max_completion_length=args.max_completion_length,
        learning_rate=1e-5,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        seed=args.seed,
        use_cpu=not torch.cuda.is_available(),
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=config,
        train_dataset=episode_prompts(specs, tokenizer),
        processing_class=tokenizer,
    )
    reward.model = trainer.model
    trainer.add_callback(
        AceEvalCallback(
            trainer,
            every_steps=args.eval_every,
            domains=domains,
            episodes_per_domain=1,
            seed=args.seed + 1,
            max_turns=args.max_turns,
            engine_options={"max_new_tokens": args.max_completion_length},
        )
    )
    trainer.train()
    for entry in trainer.state.log_history:
        print(json.dumps({k: v for k, v in entry.items() if k == "step" or k.startswith(("ace/", "reward", "loss"))}))


if __name__ == "__main__":
    main()
