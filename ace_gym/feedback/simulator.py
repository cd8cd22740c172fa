"""Who writes the feedback: a :class:`UserSimulator` turns a failed :class:`Submission` into text.

:class:`TemplateFeedback` is the deterministic default (one of the three styles of
:mod:`ace_gym.feedback.texts`). :class:`EngineUserSimulator` has an LLM write it through the same
:class:`~ace_gym.agents.base.ChatEngine` layer the policies use, AgencyBench's user-simulation
agent: it is shown the diagnostic report (which names no cell) and asked for the four-part form.
Whatever a simulator writes, :class:`~ace_gym.feedback.FeedbackRounds` checks it with
:func:`~ace_gym.feedback.texts.mentions_a_cell` and falls back to the template when it fails.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ace_gym.agents.base import ChatEngine
from ace_gym.errors import ConfigError
from ace_gym.feedback.texts import FEEDBACK_STYLES, FeedbackStyle, Submission, feedback_text

SIMULATOR_SYSTEM_PROMPT = (
    "You are the user who asked an assistant to complete a planning grid. The assistant's submission "
    "fell short of your rubric. Write your feedback to the assistant in four short parts headed Status, "
    "Failure diagnosis, Root cause and Directives, using only the facts in the report you are given. "
    "Never point at a grid position, a row or column number, or an item id: you do not know which "
    "cell is at fault, and the assistant must find out itself."
)


@runtime_checkable
class UserSimulator(Protocol):
    """Writes the feedback on a failed submission (one call per feedback round)."""

    def feedback(self, submission: Submission) -> str: ...


class TemplateFeedback:
    """The deterministic report in one of :data:`~ace_gym.feedback.texts.FEEDBACK_STYLES`."""

    def __init__(self, style: FeedbackStyle = "diagnostic") -> None:
        if style not in FEEDBACK_STYLES:
            raise ConfigError("feedback", style, f"must be one of {list(FEEDBACK_STYLES)} or a UserSimulator")
        self.style = style

    def feedback(self, submission: Submission) -> str:
        return feedback_text(submission, self.style)

    def __repr__(self) -> str:
        return f"TemplateFeedback({self.style!r})"


class EngineUserSimulator:
    """An LLM user simulator: ``engine`` writes the feedback from the ``style`` report (one
    ``generate`` call per round, no tools). An engine error or empty text gives the report itself."""

    def __init__(self, engine: ChatEngine, style: FeedbackStyle = "diagnostic") -> None:
        if not isinstance(engine, ChatEngine):
            raise ConfigError("engine", engine, "must be a ChatEngine (an object with generate())")
        self.engine = engine
        self.template = TemplateFeedback(style)

    def feedback(self, submission: Submission) -> str:
        report = self.template.feedback(submission)
        conversation = [
            {"role": "system", "content": SIMULATOR_SYSTEM_PROMPT},
            {"role": "user", "content": f"The rubric report on the assistant's submission:\n\n{report}"},
        ]
        completion = self.engine.generate([conversation], [[]])[0]
        text = completion.text.strip()
        return report if completion.finish_reason == "error" or not text else text
