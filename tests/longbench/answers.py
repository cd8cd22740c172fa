"""Fake chat engines for the AgentLongBench evaluation tests: an oracle and a nonsense answerer."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ace_gym.agents.base import Completion
from ace_gym.longbench.qa_env import ALBQAEnv
from ace_gym.longbench.rollout import QASpec
from ace_gym.longbench.scoring import answer_text


class OracleEngine:
    """Answers each conversation with the gold answer (:meth:`ALBQAEnv.answer_key`) of the spec that produced it."""

    name = "oracle"

    def __init__(self, specs: Sequence[QASpec]) -> None:
        self.answers: dict[str, str] = {}
        for spec in specs:
            env = ALBQAEnv(**dict(spec.env_kwargs))
            options = {"question_type": spec.question_type} if spec.question_type else None
            observation, _ = env.reset(seed=spec.seed, options=options)
            self.answers[json.dumps(observation)] = answer_text(env.answer_key())

    def generate(
        self, conversations: Sequence[list[dict[str, Any]]], tools: Sequence[list[dict[str, Any]]]
    ) -> list[Completion]:
        return [
            Completion(self.answers[json.dumps(c)], prompt_tokens=len(c), completion_tokens=3) for c in conversations
        ]


class NonsenseEngine:
    """Answers everything with the same unrelated text."""

    name = "nonsense"

    def generate(
        self, conversations: Sequence[list[dict[str, Any]]], tools: Sequence[list[dict[str, Any]]]
    ) -> list[Completion]:
        return [Completion("I like turtles. <answer>banana</answer>", finish_reason="stop") for _ in conversations]
