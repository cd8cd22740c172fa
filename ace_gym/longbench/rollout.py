"""Evaluate a chat engine on AgentLongBench questions: one JSON record per answered question.

:func:`run_qa_episodes` plays ``ALB-QA-v0`` episodes (one :class:`QASpec` each);
:func:`run_official_rows` answers rows of a local copy of the official dataset. Both send up to
``batch_size`` conversations per ``engine.generate`` call and yield records shaped like the ACE
episode records of :mod:`ace_gym.eval.rollout`: ``key``, ``policy``, ``env_id``, ``domain`` (the
setting, e.g. ``kf-c``), ``seed``, ``trial``, ``env_config``, ``score`` (the official metric,
None when the gold does not parse), ``reward``, ``terminated``, ``truncated``, ``messages``,
``usage`` (``turns``, ``tool_calls``, ``prompt_tokens``, ``completion_tokens``, ``time_s``,
``env_s``, ``generation_s``), plus ``question_type``, ``bucket``, ``tokens``, ``target_tokens``,
``knowledge``, ``format``, ``gt``, ``prediction``, ``raw_response``, ``finish_reason``,
``acl_sum``, ``acl_span``, ``evidence_depth``. With ``keep_context=False`` (default) the stored
``messages`` drop the history (``context_omitted`` is True): a context is reproducible from
``env_config`` and ``seed`` and can be megabytes long.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ace_gym.agents.base import ChatEngine, Completion
from ace_gym.errors import ConfigError
from ace_gym.eval.rollout import policy_name
from ace_gym.longbench.official import OfficialRow, setting_dir
from ace_gym.longbench.qa_env import ALBQAEnv
from ace_gym.longbench.scoring import parse_prediction

ENV_ID = "ALB-QA-v0"


@dataclass(frozen=True)
class QASpec:
    """One ALB-QA episode: plain ``ALBQAEnv`` keyword arguments, the reset seed, optionally the
    question type (else drawn from the seed) and a trial number (GRPO-style groups)."""

    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    seed: int = 0
    question_type: str | None = None
    trial: int = 0

    def key(self, policy: str) -> str:
        """This episode's identity under ``policy`` (resume skips keys already recorded)."""
        config = json.dumps(dict(self.env_kwargs), sort_keys=True)
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
    if type(samples) is not int or samples < 1:
        raise ConfigError("samples", samples, "must be a positive integer")
    return [
        QASpec({**dict(env_kwargs), "target_tokens": bucket}, seed + index, question_type)
        for bucket in buckets
        for question_type in question_types
        for index in range(samples)
    ]


@dataclass
class _Pending:
    """A question sent to the engine: its conversation, when it started, the env time spent so
    far, and how to turn the engine's completion into the record."""

    conversation: list[dict[str, Any]]
    started: float
    env_s: float
    finish: Callable[[Completion], dict[str, Any]]


def _generate(engine: ChatEngine, batch: Sequence[_Pending]) -> Iterator[dict[str, Any]]:
    began = time.perf_counter()
    completions = engine.generate([p.conversation for p in batch], [[] for _ in batch])
    elapsed = time.perf_counter() - began
    if len(completions) != len(batch):
        raise RuntimeError(f"engine returned {len(completions)} completions for {len(batch)} conversations")
    for pending, completion in zip(batch, completions, strict=True):
        record = pending.finish(completion)
        record["usage"].update(
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            generation_s=elapsed,
            time_s=time.perf_counter() - pending.started,
        )
        record["usage"]["env_s"] += pending.env_s
        yield record


def _batched(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    if type(size) is not int or size < 1:
        raise ConfigError("batch_size", size, "must be a positive integer")
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _usage() -> dict[str, Any]:
    return {
        "turns": 1,
        "tool_calls": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "time_s": 0.0,
        "env_s": 0.0,
        "generation_s": 0.0,
    }


def _answer_message(completion: Completion) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": completion.text or ""}
    if completion.reasoning is not None:
        message["reasoning_content"] = completion.reasoning
    return message


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
    pools: dict[str, list[ALBQAEnv]] = {}

    def start(spec: QASpec, env: ALBQAEnv) -> _Pending:
        began = time.perf_counter()
        options = {"question_type": spec.question_type} if spec.question_type is not None else None
        observation, info = env.reset(seed=spec.seed, options=options)
        env_s = time.perf_counter() - began

        def finish(completion: Completion) -> dict[str, Any]:
            stepped = time.perf_counter()
            _, reward, terminated, truncated, step_info = env.step(completion.text or "")
            record = _record(
                label,
                spec.key(label),
                info,
                step_info,
                completion,
                observation,
                keep_context,
                reward=float(reward),
                seed=spec.seed,
                trial=spec.trial,
                env_config=dict(spec.env_kwargs),
                terminated=terminated,
                truncated=truncated,
            )
            record["usage"]["env_s"] += time.perf_counter() - stepped
            return record

        return _Pending(observation, began, env_s, finish)

    for batch in _batched(specs, batch_size):
        used: dict[str, int] = {}
        pending = []
        for spec in batch:
            config = json.dumps(dict(spec.env_kwargs), sort_keys=True)
            pool = pools.setdefault(config, [])
            slot = used[config] = used.get(config, -1) + 1
            if slot == len(pool):  # one env per concurrent episode of a configuration
                pool.append(ALBQAEnv(**dict(spec.env_kwargs)))
            pending.append(start(spec, pool[slot]))
        yield from _generate(engine, pending)


def _record(
    label: str,
    key: str,
    info: Mapping[str, Any],
    step_info: Mapping[str, Any],
    completion: Completion,
    conversation: list[dict[str, Any]],
    keep_context: bool,
    **fields: Any,
) -> dict[str, Any]:
    """A record (module docstring) from a sample's info, the step's info and the completion; it
    keeps the whole ``conversation`` or, without ``keep_context``, its first and last message."""
    kept = conversation if keep_context else [conversation[0], conversation[-1]]
    return {
        "key": key,
        "policy": label,
        "env_id": ENV_ID,
        "domain": setting_dir(info["knowledge"], info["format"]),
        "question_type": info["question_type"],
        "bucket": info["bucket"],
        "tokens": info["tokens"],
        "target_tokens": info["target_tokens"],
        "knowledge": info["knowledge"],
        "format": info["format"],
        "score": step_info.get("score"),
        "gt": info["gt"],
        "prediction": step_info.get("prediction"),
        "raw_response": completion.text or "",
        "finish_reason": completion.finish_reason,
        "acl_sum": info.get("acl_sum"),
        "acl_span": info.get("acl_span"),
        "evidence_depth": info.get("evidence_depth"),
        "usage": _usage(),
        "messages": [*kept, _answer_message(completion)],
        "context_omitted": not keep_context,
        **fields,
    }


def official_key(policy: str, row: OfficialRow) -> str:
    """The identity of an official row's answer under ``policy``."""
    return f"{policy}|official|{row.source}|{row.id}"


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

    def start(row: OfficialRow) -> _Pending:
        conversation = row.prompt()

        def finish(completion: Completion) -> dict[str, Any]:
            text = completion.text or ""
            score = row.score(text)
            info = {
                "knowledge": row.knowledge,
                "format": row.fmt,
                "question_type": row.question_type,
                "bucket": row.length,
                "tokens": None,
                "target_tokens": None,
                "gt": row.answer,
            }
            step_info = {"score": score, "prediction": parse_prediction(row.question_type, row.fmt, text)}
            return _record(
                label,
                official_key(label, row),
                info,
                step_info,
                completion,
                conversation,
                keep_context,
                reward=score or 0.0,
                env_id="official",
                seed=None,
                trial=0,
                env_config={"source": row.source, "id": row.id},
                terminated=True,
                truncated=False,
            )

        return _Pending(conversation, time.perf_counter(), 0.0, finish)

    for batch in _batched(rows, batch_size):
        yield from _generate(engine, [start(row) for row in batch])
