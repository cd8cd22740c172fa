"""What policies that do not do the task earn of two training rewards (issue 38).

``alb``: ALB-QA-v0 under the strict reward, per question type and format: the per-type prior
(each type's most frequent gold answer over ``--prior-seeds`` other seeds) and, for the name
answers, the most frequent (and second most frequent) item name of the history's tool results.
``--answers paper`` measures the paper's question forms (the default until issue 38).

``intersection``: concise ALB-QA-v0 Intersection samples (forced type, seeds 0 to ``--seeds`` - 1):
how often the target is the Nth name in the order of how often the tool results list the names,
or the whole history writes them (ties by first occurrence), for N = 1-8: what a policy that
learnt N earns.

``rounds``: FeedbackRounds over ``ACE-<domain>-v0`` and ``ACE-<domain>-scenario-v0`` on the
bundled data: random slot-valid (each hidden slot a random candidate that meets its slot rules),
greedy-local and the solver; the mean reward and the pass rate. ``--final-reward final`` measures
the rubric's share (the default until issue 38).

    python benchmarks/bench_training_rewards.py alb --seeds 40
    python benchmarks/bench_training_rewards.py alb --seeds 40 --answers paper
    python benchmarks/bench_training_rewards.py intersection --seeds 200 --tokens 4096
    python benchmarks/bench_training_rewards.py rounds --seeds 40
    python benchmarks/bench_training_rewards.py rounds --seeds 40 --final-reward final
"""

from __future__ import annotations

import argparse
import collections
import json
import re
from collections.abc import Generator, Mapping
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

import ace_gym
from ace_gym.agents import ExactSolver, GreedyLocal, ScriptedPolicy
from ace_gym.agents.solver import slot_candidates
from ace_gym.agents.task_view import TaskView, ToolCallDict, call
from ace_gym.domains import DOMAIN_NAMES
from ace_gym.feedback import FeedbackRounds
from ace_gym.longbench.qa_env import ALBQAEnv
from ace_gym.longbench.question_types import FIND_TARGET_OFFSETS, INTERSECTION, QUESTION_TYPES
from ace_gym.longbench.samples import InfeasibleSample
from ace_gym.longbench.scoring import answer_text

assert ace_gym.ENV_IDS  # importing ace_gym registers the ids


def ranked_names(env: ALBQAEnv, observation: list[dict[str, Any]]) -> list[str]:
    """The table's names in the history's tool results, most frequent first."""
    names = set(env.table.names)
    text = "\n".join(m["content"] for m in observation[1:-1] if m["role"] == "tool")
    counts = collections.Counter(word for word in re.findall(r"[\w\-'.]+", text) if word in names)
    return [name for name, _ in counts.most_common()]


def _reset(env: ALBQAEnv, seed: int, options: dict[str, str]) -> list[dict[str, Any]] | None:
    """The observation of ``seed`` with the forced type, or None where the budget fits no sample
    of it (a balanced Largest Value needs five rounds, more than a verbose 32k history holds)."""
    try:
        return env.reset(seed=seed, options=options)[0]
    except InfeasibleSample:
        return None


def alb(seeds: int, prior_seeds: int, answers: str, tokens: int) -> None:
    print(
        f"ALB-QA-v0, strict reward, answers={answers}, {tokens} tokens; prior learned on seeds "
        f"10000-{10000 + prior_seeds - 1}, scored on seeds 0-{seeds - 1}"
    )
    for fmt in ("concise", "verbose"):
        env = ALBQAEnv(fmt=fmt, target_tokens=tokens, answers=answers)
        priors = []
        for question_type in QUESTION_TYPES:
            options = {"question_type": question_type}
            learned: collections.Counter[str] = collections.Counter()
            for seed in range(10_000, 10_000 + prior_seeds):
                if _reset(env, seed, options) is not None:
                    learned[json.dumps(env.answer_key())] += 1
            if not learned:
                print(f"{fmt:8s} {question_type:38s} no sample fits the budget", flush=True)
                continue
            prior = answer_text(json.loads(learned.most_common(1)[0][0]))
            earned: dict[str, list[float]] = collections.defaultdict(list)
            for seed in range(seeds):
                observation = _reset(env, seed, options)
                if observation is None:
                    continue
                earned["prior"].append(float(env.step(prior)[1]))
                if question_type in (INTERSECTION, FIND_TARGET_OFFSETS):
                    ranked = ranked_names(env, observation)
                    width = 2 if question_type == FIND_TARGET_OFFSETS else 1
                    for label, names in (("top name", ranked[:width]), ("second name", ranked[width : 2 * width])):
                        env.reset(seed=seed, options=options)
                        earned[label].append(float(env.step(answer_text(names if width == 2 else names[0]))[1]))
            priors.append(float(np.mean(earned["prior"])))
            cells = "  ".join(f"{label} {np.mean(values):.3f}" for label, values in earned.items())
            print(f"{fmt:8s} {question_type:38s} {cells}", flush=True)
        print(f"{fmt:8s} {'per-type prior, all types':38s} {np.mean(priors):.3f}", flush=True)


def intersection_positions(seeds: int, answers: str, tokens: int) -> None:
    env = ALBQAEnv(fmt="concise", target_tokens=tokens, answers=answers)
    names = set(env.table.names)
    positions: dict[str, collections.Counter[int]] = {"listed": collections.Counter(), "written": collections.Counter()}
    for seed in range(seeds):
        observation = _reset(env, seed, {"question_type": INTERSECTION})
        if observation is None:
            continue
        for kind, roles in (("listed", {"tool"}), ("written", {"assistant", "user", "tool"})):
            text = "\n".join(str(m.get("content") or "") for m in observation[1:-1] if m["role"] in roles)
            counts = collections.Counter(word for word in re.findall(r"[\w\-'.]+", text) if word in names)
            order = [name for name, _ in counts.most_common()]
            positions[kind][order.index(env.answer_key()) + 1] += 1
    found = sum(positions["listed"].values())
    print(f"ALB-QA-v0 concise Intersection, answers={answers}, {tokens} tokens, seeds 0-{seeds - 1}: n = {found}")
    for kind, counter in positions.items():
        shares = "  ".join(f"{n}: {counter[n] / found:.3f}" for n in range(1, 9))
        print(f"target is the Nth most {kind} name  {shares}", flush=True)


class RandomSlotValid(ScriptedPolicy):
    """Each hidden slot a random candidate that meets its own slot rules; no global reasoning."""

    name: ClassVar[str] = "random-slot-valid"

    def script(
        self, view: TaskView, info: Mapping[str, Any], rng: np.random.Generator, notes: dict[str, Any]
    ) -> Generator[ToolCallDict, str, None]:
        for slot in view.slots:
            valid = yield from slot_candidates(view, slot)
            if valid:
                ids = list(valid)
                yield from call("set_slot", row=slot.row, col=slot.col, id=ids[int(rng.integers(len(ids)))])


def rounds(seeds: int, final_reward: str | None) -> None:
    kwargs = {} if final_reward is None else {"final_reward": final_reward}
    print(f"final_reward={final_reward or 'default'}, seeds 0-{seeds - 1}, bundled 5x5 data, K = 2")
    for kind in ("FeedbackRounds", "scenario"):
        for domain in DOMAIN_NAMES:
            if kind == "scenario":
                env: gym.Env = gym.make(f"ACE-{domain}-scenario-v0", **kwargs).unwrapped
            else:
                env = FeedbackRounds(gym.make(f"ACE-{domain}-v0").unwrapped, **kwargs)
            cells = []
            for policy in (RandomSlotValid(), GreedyLocal(), ExactSolver()):
                rewards, passes = [], []
                for seed in range(seeds):
                    observation, info = env.reset(seed=seed)
                    episode = policy.start(observation, info, seed)
                    total = 0.0
                    while True:
                        observation, reward, terminated, truncated, info = env.step(episode.act(observation))
                        total += float(reward)
                        if terminated or truncated:
                            break
                    rewards.append(total)
                    log = info["scenario"] if kind == "scenario" else info["feedback_rounds"]
                    passes.append(log["passed"])
                cells.append(f"{policy.name} {np.mean(rewards):.3f} (pass {np.mean(passes):.3f})")
            print(f"{kind:14s} {domain:10s} " + "  ".join(cells), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    qa = sub.add_parser("alb")
    qa.add_argument("--seeds", type=int, default=40)
    qa.add_argument("--prior-seeds", type=int, default=40)
    qa.add_argument("--answers", default="balanced", choices=("balanced", "paper"))
    qa.add_argument("--tokens", type=int, default=32768)
    inter = sub.add_parser("intersection")
    inter.add_argument("--seeds", type=int, default=200)
    inter.add_argument("--answers", default="balanced", choices=("balanced", "paper"))
    inter.add_argument("--tokens", type=int, default=4096)
    played = sub.add_parser("rounds")
    played.add_argument("--seeds", type=int, default=40)
    played.add_argument("--final-reward", default=None, choices=("final", "pass_discount"))
    args = parser.parse_args()
    if args.what == "alb":
        alb(args.seeds, args.prior_seeds, args.answers, args.tokens)
    elif args.what == "intersection":
        intersection_positions(args.seeds, args.answers, args.tokens)
    else:
        rounds(args.seeds, args.final_reward)


if __name__ == "__main__":
    main()
