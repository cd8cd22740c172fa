"""Collect rollouts from a Gymnasium vector env of chat-adapted ACE envs, one JSON line each.

``gym.make_vec`` builds N copies of an ACE env wrapped in the text-action adapter and a turn
budget; every step, the conversations of all N envs go to the policy in one batched call (one
``generate`` call of a chat engine), and finished envs reset themselves (next-step autoreset) with a fresh instance from their own
seeded stream. Each JSONL record holds the messages, tool calls, per-turn rewards and info, token
ids (when the engine reports them), usage, score, seed and instance id — what an RL trainer
consumes.

Run it as written (a tiny random Llama built locally, transformers engine on CPU)::

    python examples/collect_rollouts.py

Other policies (:func:`ace_gym.policies.make_policy`): ``--policy vllm:/path/to/model`` (needs an
``if __name__ == "__main__"`` script, which this is), ``--policy openai:MODEL@http://127.0.0.1:8000/v1``
against ``vllm serve``, or a scripted baseline such as ``--policy solver``. A named policy gets the
turn budget of ``ace-gym eval`` (1000, room for a whole solver episode); the tiny random model's
default run stops after 2 turns.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from functools import partial

import gymnasium as gym
import numpy as np

import ace_gym  # noqa: F401  (registers the ACE-* env ids)
from ace_gym.errors import ConfigError
from ace_gym.eval import run_vector_episodes
from ace_gym.eval.fit import TRAINING_DATASET
from ace_gym.policies import POLICY_SPECS, make_policy
from ace_gym.registration import ENV_IDS
from ace_gym.wrappers import ChatAdapter, StepBudget
from ace_gym.wrappers.step_budget import DEFAULT_MAX_TURNS


def _plain(value: object) -> object:
    """JSON fallback for numpy scalars."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", help=f"{POLICY_SPECS} (default: hf: on a tiny local model)")
    parser.add_argument("--env-id", default="ACE-course-v0")
    parser.add_argument(
        "--dataset",
        default=TRAINING_DATASET,
        help="the data of an ACE-<domain>-v0 id (default: the bundled 5x7 set; the published 5x5 names tell the truth)",
    )
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument("--episodes", type=int, default=6)
    parser.add_argument(
        "--max-turns",
        type=int,
        default=None,
        help=f"policy turns per episode (default {DEFAULT_MAX_TURNS} with --policy, 2 for the tiny model)",
    )
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--vectorization-mode", choices=("sync", "async"), default="sync")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="JSONL file (default: in a new temporary directory)")
    args = parser.parse_args()

    workdir = tempfile.mkdtemp(prefix="ace-rollouts-")
    try:  # the engines import their optional back end (transformers, vllm, openai) when built
        if args.policy:
            policy = make_policy(args.policy)
        else:
            from ace_gym.agents.llm.tiny_model import build_tiny_model

            model = build_tiny_model(f"{workdir}/tiny-model", seed=args.seed)
            policy = make_policy(f"hf:{model}", max_new_tokens=args.max_new_tokens, seed=args.seed)
    except ImportError as error:
        sys.exit(
            f"collect_rollouts.py: {error.name} is missing; install it with pip install '.[hf]' in an ace-gym checkout"
        )
    except ConfigError as error:  # among them: an engine whose back end is not installed
        sys.exit(f"collect_rollouts.py: {error}")
    max_turns = args.max_turns if args.max_turns is not None else DEFAULT_MAX_TURNS if args.policy else 2
    envs = gym.make_vec(
        args.env_id,
        num_envs=args.num_envs,
        **({"dataset": args.dataset} if args.env_id in ENV_IDS else {}),
        vectorization_mode=args.vectorization_mode,
        vector_kwargs={"shared_memory": False} if args.vectorization_mode == "async" else {},
        wrappers=[ChatAdapter, partial(StepBudget, max_turns=max_turns)],
    )
    out = args.out or f"{workdir}/rollouts.jsonl"
    try:
        with open(out, "w", encoding="utf-8", errors="backslashreplace") as handle:  # lone surrogates: \udXXX
            for record in run_vector_episodes(envs, policy, num_episodes=args.episodes, seed=args.seed):
                # vector envs batch info values into numpy arrays: numpy scalars may reach the record
                handle.write(json.dumps(record, ensure_ascii=False, default=_plain) + "\n")
                usage = record["usage"]
                print(
                    f"{record['instance_id']}: score {record['score']}, {usage['turns']} turns, "
                    f"{usage['prompt_tokens']}+{usage['completion_tokens']} tokens, "
                    f"generation {usage['generation_s']:.2f}s, env {usage['env_s'] * 1e3:.2f}ms"
                )
    finally:
        envs.close()
    print(f"{args.episodes} episodes in {out}")


if __name__ == "__main__":
    main()
