"""An OpenPipe ART rollout function over ace-gym's chat adapter (``pip install ".[art]"``).

:func:`rollout` plays one ACE episode (an :class:`~ace_gym.eval.EpisodeSpec`: the env,
``ChatAdapter`` and the turn budget) with an ``art.Model``'s OpenAI-compatible client and returns
an ``art.Trajectory``: the opening messages and every tool reply as messages, every model turn as
its ``Choice`` (what ART trains on), the tool schemas, and ``reward`` = the episode's score from
the env (a model that stops calling tools is scored on the grid it left, as the turn budget
scores it). ART's trainers take ``art.TrajectoryGroup`` s of such rollouts, e.g.
``await art.gather_trajectory_groups(art.TrajectoryGroup(rollout(model, spec) for spec in
EpisodeSpec.of(...).group(8)) for ...)`` then ``await model.train(groups)`` with a backend (a GPU
for ``LocalBackend``). The rollout itself needs no GPU.

Run it against any OpenAI-compatible server, e.g. ``vllm serve Qwen/Qwen3-0.6B`` (the defaults)::

    python examples/art_rollout.py --base-url http://127.0.0.1:8000/v1 --model Qwen/Qwen3-0.6B --domain course --seed 0

The episode is played with the recommended training settings (:data:`ace_gym.eval.fit.FIT`:
compact tool replies, several calls a turn; ``--published-replies`` plays the published ones). It
prints one JSON line: reward, turns, and the trajectory's messages as ART logs them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING, Any

from ace_gym.errors import ConfigError, integer, number
from ace_gym.eval import EpisodeSpec
from ace_gym.eval.fit import TRAINING_DATASET, fit_spec

if TYPE_CHECKING:
    import art
    from openai import AsyncOpenAI


SAMPLING: dict[str, Any] = {
    "temperature": 1.0,
    "top_p": 1.0,
    "max_tokens": 512,
    "extra_body": {"top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0},
}
"""What :func:`rollout` asks for each turn unless told otherwise: the model's whole distribution at
temperature 1 and at most ``max_tokens`` new tokens a turn (the per-turn cap; set it as evaluation
caps a turn). Every setting is sent, so none of the server's defaults applies: vLLM's server
otherwise samples with the model's ``generation_config.json`` (a top-k of 20 for Qwen3), which
the trained log-probabilities do not assume. ``top_k`` -1 is "none" to vLLM and SGLang alike."""


async def rollout(model: art.Model, spec: EpisodeSpec, sampling: dict[str, Any] | None = None) -> art.Trajectory:
    """One episode of ``spec`` played by ``model`` (on its inference endpoint), as an ART
    trajectory; each turn's request carries ``sampling`` (default :data:`SAMPLING`) unchanged."""
    import art

    env = spec.make_env()
    try:
        messages, info = env.reset(seed=spec.seed, options=spec.reset_options())
        tools = info["tools"]
        trajectory = art.Trajectory(
            messages_and_choices=list(messages),
            tools=tools,
            reward=0.0,
            metadata={"domain": spec.domain, "instance_id": info["instance_id"], "seed": spec.seed},
        )
        client = inference_client(model)
        turns, done = 0, False
        while not done:
            completion = await client.chat.completions.create(
                model=model.get_inference_name(),
                messages=trajectory.messages(),
                tools=tools,
                **(SAMPLING if sampling is None else sampling),
            )
            choice = completion.choices[0]
            trajectory.messages_and_choices.append(choice)
            replies, _, terminated, truncated, step_info = env.step(choice.message.model_dump(exclude_none=True))
            trajectory.messages_and_choices.extend(dict(reply) for reply in replies)
            turns, done = turns + 1, terminated or truncated
        trajectory.reward = float(step_info.get("score") or 0.0)
        trajectory.metrics.update(turns=turns, score=trajectory.reward)
        return trajectory.finish()
    finally:
        env.close()


def inference_client(model: art.Model) -> AsyncOpenAI:
    """An OpenAI client on the model's inference endpoint. Not ``model.openai_client()``:
    openpipe-art 0.5.18 builds that one with an ``httpx.Timeout``, which openai 3 (built on
    ``httpx2``; ART asks for ``openai>=2.14``) cannot add to a float, so its first request raises
    TypeError."""
    from openai import AsyncOpenAI

    return AsyncOpenAI(base_url=model.inference_base_url, api_key=model.inference_api_key)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", default="http://127.0.0.1:8000/v1", help="an OpenAI-compatible endpoint")
    parser.add_argument("--model", default="Qwen/Qwen3-0.6B", help="the served model's name")
    parser.add_argument("--api-key", default="EMPTY")
    parser.add_argument("--domain", default="course")
    parser.add_argument(
        "--dataset",
        default=TRAINING_DATASET,
        help="default: the bundled 5x7 set (the published 5x5 names tell the truth)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--instance-index", type=int, default=0)
    parser.add_argument("--max-turns", type=int, default=50)
    parser.add_argument("--temperature", type=float, default=SAMPLING["temperature"])
    parser.add_argument(
        "--max-turn-tokens", type=int, default=SAMPLING["max_tokens"], help="new tokens a turn, at most"
    )
    parser.add_argument(
        "--published-replies",
        action="store_true",
        help="play the published tool replies, one call a turn (default: ace_gym.eval.fit.FIT, docs/training.md)",
    )
    args = parser.parse_args(argv)
    try:  # sent to the server as they are: checked here, not by an engine
        max_turn_tokens = integer("--max-turn-tokens", args.max_turn_tokens, minimum=1)
        temperature = number("--temperature", args.temperature, minimum=0, finite=True)
    except ConfigError as error:
        parser.error(str(error))
    try:
        import art
    except ImportError as error:
        sys.exit(
            f"art_rollout.py: {error.name} is missing; install it with pip install '.[art]' in an ace-gym checkout"
        )
    model = art.Model(
        name=args.model,
        project="ace-gym",
        inference_base_url=args.base_url,
        inference_api_key=args.api_key,
        inference_model_name=args.model,
    )
    spec = EpisodeSpec.of(
        args.domain, args.dataset, instance_index=args.instance_index, seed=args.seed, max_turns=args.max_turns
    )
    if not args.published_replies:
        spec = fit_spec(spec)  # the recommended training settings: compact replies, several calls a turn
    sampling = {**SAMPLING, "temperature": temperature, "max_tokens": max_turn_tokens}
    trajectory = asyncio.run(rollout(model, spec, sampling))
    group = art.TrajectoryGroup([trajectory])
    logged: dict[str, Any] = trajectory.for_logging()
    print(json.dumps({"group_size": len(group.trajectories), "turns": trajectory.metrics["turns"], **logged}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
