"""Answer keys: the info entries that grade an episode and must not reach the model's side.

Some envs put what grades the episode in ``info``: ALB-QA the gold answer (``gt``),
``ACE-StepWise-v0`` the reference's next calls (``reference``), ``UnsolvableMix`` whether the task
is unsolvable, its kind and certificate (``apb.unsolvable``). In process the caller owns ``info``;
every layer that sends an episode to a client (``ace-gym serve`` and its MCP ``metadata``,
openenv-core's ``Environment``) sends :func:`client_info` instead, unless the client asked for
the :data:`GRADER` channel by name (an evaluator that scores and summarises the episode, as
``ace-gym eval --env-url`` does).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

GRADER = "grader"
"""The channel a client names to receive answer keys with every info."""

QA_GOLD = "gt"
"""The ``info`` key of ALB-QA's gold answer (:class:`~ace_gym.longbench.qa_env.ALBQAEnv`)."""
ANSWER_KEYS: tuple[tuple[str, ...], ...] = (
    (QA_GOLD,),
    ("reference",),
    ("apb", "unsolvable"),
)
"""The answer keys, each as its path of keys into ``info``."""


def client_info(info: Mapping[str, Any], channels: tuple[str, ...] | list[str] = ()) -> Mapping[str, Any]:
    """``info`` as a client may see it: without :data:`ANSWER_KEYS` (copied only along their
    paths; ``info`` itself is never changed), or ``info`` whole when ``channels`` names :data:`GRADER`."""
    if GRADER in channels:
        return info
    for path in ANSWER_KEYS:
        info = _without(info, path)
    return info


def _without(info: Mapping[str, Any], path: tuple[str, ...]) -> Mapping[str, Any]:
    head, rest = path[0], path[1:]
    if not isinstance(info, Mapping) or head not in info:
        return info
    if not rest:
        return {key: value for key, value in info.items() if key != head}
    inner = _without(info[head], rest)
    return info if inner is info[head] else {**info, head: inner}
