"""Evaluate a chat engine on AgentLongBench questions: one JSON record per answered question.

:func:`run_qa_episodes` plays ``ALB-QA-v0`` episodes (one :class:`QASpec` each);
:func:`run_official_rows` answers rows of a local copy of the official dataset. Both send up to
``batch_size`` conversations per ``engine.generate`` call and yield records shaped like the ACE
episode records of :mod:`ace_gym.eval.records`: ``key``, ``policy``, ``env_id``, ``domain`` (the
setting, e.g. ``kf-c``), ``seed``, ``trial``, ``env_config``, ``score`` (the official metric,
None when the gold does not parse: the paper-comparable verdict, whatever the env's ``reward``
option), ``reward`` (the env's reward, the strict score by default), ``terminated``, ``truncated``, ``messages``,
``usage`` (``turns``, ``tool_calls``, ``prompt_tokens``, ``completion_tokens``, ``time_s``,
``env_s``, ``generation_s``), plus ``question_type``, ``bucket``, ``tokens``, ``target_tokens``,
``knowledge``, ``format``, ``gt``, ``prediction``, ``raw_response``, ``finish_reason``,
``acl_sum``, ``acl_span``, ``evidence_depth``. With ``keep_context=False`` (default) the stored
``messages`` drop the history (``context_omitted`` is True): a context is reproducible from
``env_config`` and ``seed`` and can be megabytes long.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ace_gym.agents.base import ChatEngine, Completion
from ace_gym.agents.policies import policy_name
from ace_gym.errors import integer
from ace_gym.longbench.official import OfficialRow, setting_dir
from ace_gym.longbench.qa_env import ALBQAEnv
from ace_gym.longbench.samples import TRAINING_ANSWERS
from ace_gym.longbench.scoring import parse_prediction
from ace_gym.runs.loop import EngineActor, Episode, run_loop

ENV_ID = "ALB-QA-v0"


@dataclass(frozen=True)
class QASpec:
    """One ALB-QA episode: plain ``ALBQAEnv`` keyword arguments, the reset seed, optionally the
    question type (else drawn from the seed) and a trial number (GRPO-style groups)."""

    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    seed: int = 0
    question_type: str | None = None
    trial: int = 0

    def __post_init__(self) -> None:
        if "answers" not in self.env_kwargs:  # named: the default moved from the paper's forms (issue 38)
            object.__setattr__(self, "env_kwargs", {**dict(self.env_kwargs), "answers": TRAINING_ANSWERS})

    def key(self, policy: str) -> str:
        """This episode's identity under ``policy`` (resume skips keys already recorded). The
        ``answers`` setting is left out when it is ``"paper"``, the only form before issue 38,
        so that records written then keep their keys."""
        kwargs = dict(self.env_kwargs)
        if kwargs.get("answers") == "paper":
            del kwargs["answers"]
        config = json.dumps(kwargs, sort_keys=True)
        return f"{policy}|{ENV_ID}|{config}|type={self.question_type}|trial={self.trial}|seed={self.seed}"


def qa_specs(
    env_kwargs: Mapping[str, Any],
    *,
    question_types: Sequence[str],
    buckets: Sequence[int | str],
    samples: int,
    seed: int = 0,
) -> list[QASpec]:
    """``samples`` specs per (bucket, question type), seeds ``seed, seed+1, ...`` within a cell."""
    samples = integer("samples", samples, minimum=1)
    return [
        QASpec({**dict(env_kwargs), "target_tokens": bucket}, seed + index, question_type)
        for bucket in buckets
        for question_type in question_types
        for index in range(samples)
    ]


def run_qa_episodes(
    specs: Iterable[QASpec],
    engine: ChatEngine,
    *,
    batch_size: int = 8,
    name: str | None = None,
    keep_context: bool = False,
) -> Iterator[dict[str, Any]]:
    """Answer every spec's question with ``engine``, ``batch_size`` per generate call; yields one
    record per spec, in order (see the module docstring). Envs are built once per configuration
    and batch slot, then reused."""
    label = name or policy_name(engine)
    pools: dict[str, list[ALBQAEnv]] = {}  # idle envs by configuration

    def open_episode(spec: QASpec) -> tuple[Episode, Any, dict[str, Any]]:
        config = json.dumps(dict(spec.env_kwargs), sort_keys=True)
        idle = pools.setdefault(config, [])
        env = idle.pop() if idle else ALBQAEnv(**dict(spec.env_kwargs))
        fields = {"seed": spec.seed, "trial": spec.trial, "env_config": dict(spec.env_kwargs)}
        build = partial(_record, keep_context=keep_context, fields=fields)
        episode = Episode(spec.key(label), label, env, build, release=idle.append)
        options = {"question_type": spec.question_type} if spec.question_type is not None else None
        return episode, *episode.reset(seed=spec.seed, options=options)

    return run_loop(specs, open_episode, EngineActor(engine, _answer_text), batch_size)


def _answer_text(completion: Completion) -> str:
    return completion.text or ""


def _answer_message(completion: Completion) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": completion.text or ""}
    if completion.reasoning is not None:
        message["reasoning_content"] = completion.reasoning
    return message


def _record(
    episode: Episode,
    terminated: bool,
    truncated: bool,
    step_info: Mapping[str, Any],
    *,
    keep_context: bool,
    fields: Mapping[str, Any],
) -> dict[str, Any]:
    """A record (module docstring) from a question's reset info, its step's info and the answer;
    it keeps the whole conversation or, without ``keep_context``, its first and last message."""
    info, completion, conversation = episode.reset_info, episode.last_completion, episode.messages
    assert completion is not None  # an answered question had one turn, from an engine
    kept = conversation if keep_context else [conversation[0], conversation[-1]]
    return {
        "key": episode.key,
        "policy": episode.policy,
        "env_id": ENV_ID,
        "domain": setting_dir(info["knowledge"], info["format"]),
        "question_type": info["question_type"],
        "bucket": info["bucket"],
        "tokens": info["tokens"],
        "target_tokens": info["target_tokens"],
        "knowledge": info["knowledge"],
        "format": info["format"],
        "score": step_info.get("official_score"),  # paper-comparable, whatever the env's reward
        "gt": step_info.get("gt"),
        "prediction": step_info.get("prediction"),
        "raw_response": completion.text or "",
        "finish_reason": completion.finish_reason,
        "acl_sum": info.get("acl_sum"),
        "acl_span": info.get("acl_span"),
        "evidence_depth": info.get("evidence_depth"),
        "usage": episode.usage,
        "messages": [*kept, _answer_message(completion)],
        "context_omitted": not keep_context,
        "reward": float(episode.turns[-1]["reward"]),
        **fields,
        "terminated": bool(terminated),
        "truncated": bool(truncated),
    }


def official_key(policy: str, row: OfficialRow) -> str:
    """The identity of an official row's answer under ``policy``."""
    return f"{policy}|official|{row.source}|{row.id}"


class _OfficialRowEnv:
    """An official row as a one-question episode: reset shows its prompt, step scores the answer."""

    def __init__(self, row: OfficialRow) -> None:
        self.row = row

    def reset(self, **_: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        row = self.row
        info = {
            "knowledge": row.knowledge,
            "format": row.fmt,
            "question_type": row.question_type,
            "bucket": row.length,
            "tokens": None,
            "target_tokens": None,
            "gt": row.answer,
        }
        return row.prompt(), info

    def step(self, text: str) -> tuple[None, float, bool, bool, dict[str, Any]]:
        row = self.row
        score = row.score(text)
        prediction = parse_prediction(row.question_type, row.fmt, text)
        info = {"score": score, "official_score": score, "prediction": prediction}
        return None, score or 0.0, True, False, info

    def close(self) -> None:
        """Nothing to release."""


def run_official_rows(
    rows: Iterable[OfficialRow],
    engine: ChatEngine,
    *,
    batch_size: int = 8,
    name: str | None = None,
    keep_context: bool = False,
) -> Iterator[dict[str, Any]]:
    """Answer rows of the official dataset with ``engine``; records as for :func:`run_qa_episodes`
    (``env_id`` "official", ``bucket`` the length directory, ``seed`` None, ``tokens`` None)."""
    label = name or policy_name(engine)

    def open_episode(row: OfficialRow) -> tuple[Episode, Any, dict[str, Any]]:
        fields = {"env_id": "official", "seed": None, "trial": 0, "env_config": {"source": row.source, "id": row.id}}
        build = partial(_record, keep_context=keep_context, fields=fields)
        episode = Episode(official_key(label, row), label, _OfficialRowEnv(row), build)
        return episode, *episode.reset()

    return run_loop(rows, open_episode, EngineActor(engine, _answer_text), batch_size)
