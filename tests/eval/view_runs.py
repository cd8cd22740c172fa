"""Real runs for the run viewer's tests and screenshots, made without a network or a download.

:class:`FlawedSolverChat` is a chat engine that writes the exact solver's calls as Hermes text,
with its reasoning, but like a model that makes mistakes: every few turns a truncated tool call
(a parse error) and, before its first ``set_slot``, that slot set to a candidate that breaks the
slot's rules, then ``done`` (a failed submission, so a feedback round follows) before the
solver's own ``set_slot`` corrects it. :func:`llm_run` plays it through
:func:`~ace_gym.eval.run_episodes` with injected tool failures, feedback rounds and a context
window, and writes the run folder as ``ace-gym eval`` would (episodes.jsonl, summary.json).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ace_gym.agents import ExactSolver
from ace_gym.agents.base import Completion
from ace_gym.cli import main
from ace_gym.domains import DOMAIN_NAMES
from ace_gym.envs import AceEnv
from ace_gym.eval import EpisodeSpec, run_episodes
from ace_gym.instance import CompiledInstance
from ace_gym.runs.results import EPISODES_FILE, EpisodeLog
from ace_gym.tools import tool_names

MALFORMED_EVERY = 5
"""Every this many turns of an episode, the engine writes a truncated tool call."""


class FlawedSolverChat:
    """A deterministic chat engine (module docstring). It keeps each episode's solver between
    turns, keyed by the opening messages (a context window hides older turns from it), and feeds
    the solver the newest tool reply when its last text was the solver's own call."""

    name = "flawed-solver-chat"

    def __init__(self, specs: Sequence[EpisodeSpec]) -> None:
        self._episodes: dict[str, dict[str, Any]] = {}
        self._instances = {json.dumps(spec.opening()): _instance(spec) for spec in specs}

    def generate(
        self, conversations: Sequence[list[dict[str, Any]]], tools: Sequence[list[dict[str, Any]]]
    ) -> list[Completion]:
        return [self._next(conversation, schemas) for conversation, schemas in zip(conversations, tools, strict=True)]

    def _next(self, conversation: list[dict[str, Any]], schemas: list[dict[str, Any]]) -> Completion:
        opening = json.dumps(conversation[:2])
        state = self._episodes.get(opening)
        if state is None:
            names = {schema["function"]["name"] for schema in schemas}
            domain = next(d for d in DOMAIN_NAMES if set(tool_names(d).values()) <= names)
            info = {"domain": domain, "system_prompt": conversation[0]["content"], "tools": schemas}
            solver = ExactSolver().start(conversation[1]["content"], info, seed=0)
            state = self._episodes[opening] = {
                "solver": solver,
                "call": solver.act(conversation[1]["content"]),
                "turn": 0,
                "last": None,
                "mistakes": ["wrong slot", "early done"],
                "compiled": self._instances[opening],
            }
        elif state["last"] == "call" and conversation[-1]["role"] == "tool":
            state["call"] = state["solver"].act(conversation[-1]["content"])
        state["turn"] += 1
        call = state["call"]
        if state["turn"] % MALFORMED_EVERY == 0:
            state["last"] = "malformed"
            text = "<think>Next: " + call["name"] + ".</think>\n" + hermes_call(call["name"], **call["arguments"])[:30]
        elif call["name"] == "set_slot" and state["mistakes"]:
            state["last"] = mistake = state["mistakes"].pop(0)
            if mistake == "early done":
                text = "<think>The grid looks finished to me.</think>\n" + hermes_call("done")
            else:
                wrong = _slot_breaking_id(state["compiled"], call["arguments"]["row"], call["arguments"]["col"])
                text = "<think>This one looks cheap.</think>\n" + hermes_call(
                    "set_slot", **{**call["arguments"], "id": wrong}
                )
        else:
            state["last"] = "call"
            text = f"<think>Turn {state['turn']}: {call['name']}.</think>\n" + hermes_call(
                call["name"], **call["arguments"]
            )
        return Completion(text, prompt_tokens=len(conversation), completion_tokens=len(text) // 4, finish_reason="stop")


def hermes_call(name: str, **arguments: Any) -> str:
    """A tool call as Qwen2.5's chat template writes it (as ``tests.steering``'s, without its torch import)."""
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def _instance(spec: EpisodeSpec) -> CompiledInstance:
    env = AceEnv(spec.domain, spec.dataset)
    env.reset(seed=spec.seed, options=spec.reset_options())
    return env.compiled


def _slot_breaking_id(compiled: CompiledInstance, row: int, col: int) -> str:
    """A candidate of the hidden slot at ``(row, col)`` that breaks its slot rules (the first
    candidate when every one passes them)."""
    slot = next(slot for slot in compiled.slots if (slot.row, slot.col) == (row, col))
    breaking = [i for i, item in enumerate(slot.candidate_items) if item not in slot.valid_items]
    return slot.candidate_ids[breaking[0] if breaking else 0]


def llm_run(out: Path, domain: str = "course", instances: Sequence[int] = (6, 14)) -> Path:
    """The run folder of :class:`FlawedSolverChat` on ``instances`` of the 5x5 ``domain``, with a
    0.2 tool-failure rate, two feedback rounds and a context window of the last 3 turns."""
    specs = [
        EpisodeSpec.of(
            domain,
            instance_index=index,
            seed=index,
            tool_failure_rate=0.2,
            feedback_rounds={"max_attempts": 2},
            context={"last_turns": 3},
        )
        for index in instances
    ]
    out.mkdir(parents=True, exist_ok=True)
    with EpisodeLog(out / EPISODES_FILE) as log:
        for record in run_episodes(specs, FlawedSolverChat(specs), batch_size=len(specs)):
            log.append(record)
    assert main(["report", str(out)]) == 0
    return out
