"""User simulators: the template report, and an LLM writing feedback through the engine layer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from ace_gym.agents.base import Completion
from ace_gym.errors import ConfigError
from ace_gym.feedback import EngineUserSimulator, Submission, TemplateFeedback, UserSimulator, feedback_text, grade
from ace_gym.instance import resolve_dataset


class RecordingEngine:
    """Answers every conversation with ``reply`` (and ``finish_reason``), keeping what it was sent."""

    def __init__(self, reply: str, finish_reason: str | None = "stop") -> None:
        self.reply, self.finish_reason = reply, finish_reason
        self.calls: list[tuple[Sequence[list[dict[str, Any]]], Sequence[list[dict[str, Any]]]]] = []

    def generate(
        self, conversations: Sequence[list[dict[str, Any]]], tools: Sequence[list[dict[str, Any]]]
    ) -> list[Completion]:
        self.calls.append((conversations, tools))
        return [Completion(self.reply, finish_reason=self.finish_reason) for _ in conversations]


def _submission() -> Submission:
    compiled = resolve_dataset("5x5", "meal").compiled(34)
    grid = np.array(compiled.truth)
    grid[compiled.slots[0].cell] = -1
    return Submission(grade(compiled, grid), 1, 2, 1.0)


def test_template_feedback__is_the_styled_report_and_a_user_simulator() -> None:
    simulator = TemplateFeedback("names")
    assert isinstance(simulator, UserSimulator)
    assert simulator.feedback(_submission()) == feedback_text(_submission(), "names")
    with pytest.raises(ConfigError, match="feedback"):
        TemplateFeedback("verbose")  # type: ignore[arg-type]


def test_engine_user_simulator__writes_from_the_report_without_tools() -> None:
    engine = RecordingEngine("  Status: not yet. Directives: check the totals.  ")
    simulator = EngineUserSimulator(engine, style="diagnostic")
    assert isinstance(simulator, UserSimulator)
    assert simulator.feedback(_submission()) == "Status: not yet. Directives: check the totals."
    ((conversations, tools),) = engine.calls
    system, user = conversations[0]
    assert system["role"] == "system" and "Never point at a grid position" in system["content"]
    assert feedback_text(_submission(), "diagnostic") in user["content"]
    assert list(tools) == [[]]


@pytest.mark.parametrize(("reply", "finish_reason"), [("", "stop"), ("engine failed: timeout", "error")])
def test_engine_user_simulator__falls_back_to_the_report_on_an_engine_error(reply: str, finish_reason: str) -> None:
    simulator = EngineUserSimulator(RecordingEngine(reply, finish_reason), style="directive")
    assert simulator.feedback(_submission()) == feedback_text(_submission(), "directive")


def test_engine_user_simulator__rejects_what_is_not_an_engine() -> None:
    with pytest.raises(ConfigError, match="engine"):
        EngineUserSimulator(object())  # type: ignore[arg-type]
