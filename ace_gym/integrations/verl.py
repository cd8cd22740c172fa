"""verl (``pip install ".[verl]"``): ACE episodes as a verl agent loop.

Importing this module registers :class:`AceAgentLoop` under ``agent_name="ace_gym"``; dataset rows
(:func:`write_dataset`) carry that name and the episode in ``extra_info``. Point verl at it with
``actor_rollout_ref.rollout.agent.agent_loop_config_path`` (or import the module in your entry
point) and ``actor_rollout_ref.rollout.mode=async``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register
from verl.workers.rollout.replica import TokenOutput

from ace_gym.atomic import AtomicFile
from ace_gym.chat_template import ChatTokens
from ace_gym.envs import AceEnv
from ace_gym.errors import ConfigError, choice, integer, optional_integer
from ace_gym.eval.episode_spec import EpisodeSpec
from ace_gym.integrations.rewards import REWARDS, partial_score

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

AGENT_NAME = "ace_gym"
MAX_RESUMES = 8
"""How many times one turn's generation is resumed after verl aborts it before the rollout fails."""


@register(AGENT_NAME)
class AceAgentLoop(AgentLoopBase):
    """One ACE episode through the adapter stack against verl's server manager, token-exact.

    ``extra_info["ace_episode"]`` is the JSON of its :class:`~ace_gym.eval.EpisodeSpec`. The
    prompt is rendered by the chat template with the tools; each turn the server gets the
    append-only ids (:class:`~ace_gym.chat_template.ChatTokens`), the decoded text goes to the
    env, and the replies are rendered after the generated ids. Each turn gets at most the room
    left in ``rollout.response_length`` (``max_tokens``, or less when ``sampling_params`` asks for
    less, or ``extra_info["ace_max_turn_tokens"]``, the per-turn cap :func:`write_dataset` stores:
    verl itself gives every turn all the room left), so every call the env runs is in the ids
    verl trains on; the episode ends when the env ends it or the response reaches
    ``response_length`` (then the grid as it stands is scored, ``extra_fields["ace_truncated"]``). A generation verl aborts (partial rollout) is resumed,
    never played as a turn. Returns the prompt ids, the response up to the end of the last turn
    (at most ``response_length`` ids), its mask (1 = generated) and logprobs (0.0 on env ids), and
    as ``reward_score`` the score, or with ``extra_info["ace_reward"] == "partial"`` the partial
    score of the final grid (:func:`~ace_gym.integrations.rewards.partial_score`; ``ace_score``
    stays the 0/1 score).
    """

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        spec = EpisodeSpec.from_json(kwargs["extra_info"]["ace_episode"])
        reward = choice("extra_info.ace_reward", kwargs["extra_info"].get("ace_reward", "score"), REWARDS)
        turn_cap = optional_integer(
            "extra_info.ace_max_turn_tokens", kwargs["extra_info"].get("ace_max_turn_tokens"), minimum=1
        )
        budget = integer("rollout.response_length", self.rollout_config.response_length, minimum=1)
        # verl annotates its tokenizer as AutoTokenizer, the factory class; it holds the tokenizer
        # AutoTokenizer.from_pretrained built
        tokenizer = cast("PreTrainedTokenizerBase", self.tokenizer)
        env = spec.make_env()
        core = cast(AceEnv, env.unwrapped)  # make_env's StepBudget refuses a stack that is not on an AceEnv
        messages, info = env.reset(seed=spec.seed, options=spec.reset_options())
        tokens = ChatTokens(tokenizer, info["tools"], **dict(self.apply_chat_template_kwargs))
        tokens.reset(messages)
        request_id, score, truncated = uuid4().hex, None, False
        while score is None:
            room = budget - (len(tokens.token_ids) - len(tokens.segments[0].token_ids))
            room = room if turn_cap is None else min(room, turn_cap)
            output = await self._generate(request_id, tokens.token_ids, _capped(sampling_params, room))
            text = tokenizer.decode(output.token_ids, skip_special_tokens=True)
            _, _, terminated, truncated, step = env.step(text)
            tokens.sync(step["messages"], output.token_ids, output.log_probs)
            if terminated or truncated:
                score = float(step["score"])
            elif len(tokens.token_ids) - len(tokens.segments[0].token_ids) >= budget:
                score, truncated = core.score().score, True
        reward_score = partial_score(core.compiled, core.grid) if reward == "partial" else score
        env.close()
        trajectory = tokens.trajectory(through_last_turn=True)
        if trajectory is None:
            raise ConfigError("chat template", tokenizer.name_or_path, "rewrites earlier turns: no token-exact rollout")
        logprobs = trajectory["logprobs"]
        return AgentLoopOutput(
            prompt_ids=trajectory["prompt_ids"],
            response_ids=trajectory["response_ids"][:budget],
            response_mask=trajectory["assistant_mask"][:budget],
            response_logprobs=None if logprobs is None else logprobs[:budget],
            reward_score=reward_score,
            num_turns=len(step["messages"]),
            metrics=AgentLoopMetrics(),
            extra_fields={
                "ace_score": score,
                "ace_turns": len(trajectory["turn_starts"]),
                "ace_truncated": bool(truncated),
            },
        )

    async def _generate(self, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any]) -> TokenOutput:
        """One whole model turn of at most ``sampling_params["max_tokens"]`` ids. A generation verl
        aborted (``stop_reason == "aborted"``: a weight sync interrupted it) is not a model turn: it
        is resumed after its partial ids, as verl's own partial rollout resumes it, with the ids
        left, and the pieces make one turn (at most :data:`MAX_RESUMES` times, then RuntimeError:
        an infrastructure failure is never scored)."""
        turn = TokenOutput(token_ids=[], log_probs=[])
        for _ in range(MAX_RESUMES + 1):
            left = sampling_params["max_tokens"] - len(turn.token_ids)
            if left <= 0:  # aborted just as the turn reached its cap: the turn is whole
                turn.stop_reason = "length"
                return turn
            output = await self.server_manager.generate(
                request_id,
                prompt_ids=prompt_ids + turn.token_ids,
                sampling_params={**sampling_params, "max_tokens": left},
            )
            turn.token_ids.extend(output.token_ids)
            if turn.log_probs is not None and output.log_probs is not None:
                turn.log_probs.extend(output.log_probs)
            else:
                turn.log_probs = None
            if output.stop_reason != "aborted":
                turn.stop_reason = output.stop_reason
                return turn
        raise RuntimeError(f"verl aborted generation {request_id} {MAX_RESUMES + 1} times in a row; no turn to score")


def _capped(sampling_params: dict[str, Any], room: int) -> dict[str, Any]:
    """``sampling_params`` with ``max_tokens`` (verl's servers also read ``max_new_tokens``) at
    most ``room``."""
    asked = sampling_params.get("max_tokens", sampling_params.get("max_new_tokens", room))
    rest = {key: value for key, value in sampling_params.items() if key != "max_new_tokens"}
    return {**rest, "max_tokens": min(int(asked), room)}


def write_dataset(
    specs: Sequence[EpisodeSpec],
    path: str | os.PathLike[str],
    *,
    reward: str = "score",
    max_turn_tokens: int | None = None,
) -> None:
    """One Parquet row per spec for verl's ``RLHFDataset``: ``prompt`` (the opening messages),
    ``data_source``, ``agent_name`` (``"ace_gym"``) and ``extra_info`` (``ace_episode``,
    ``ace_reward`` when ``reward`` is "partial", ``ace_max_turn_tokens`` when ``max_turn_tokens``
    caps each turn, as evaluation caps a turn); atomically."""
    from datasets import Dataset

    reward = choice("reward", reward, REWARDS)
    max_turn_tokens = optional_integer("max_turn_tokens", max_turn_tokens, minimum=1)
    settings = {
        **({"ace_reward": reward} if reward != "score" else {}),
        **({"ace_max_turn_tokens": max_turn_tokens} if max_turn_tokens is not None else {}),
    }

    rows = [
        {
            "prompt": spec.opening(),
            "data_source": f"ace_gym/{spec.dataset}/{spec.domain}",
            "agent_name": AGENT_NAME,
            "extra_info": {"ace_episode": spec.to_json(), **settings},
        }
        for spec in specs
    ]
    with AtomicFile(path) as target:
        Dataset.from_list(rows).to_parquet(target.handle)
