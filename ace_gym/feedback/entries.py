"""AgencyBench's entry of the wrapper registry (:mod:`ace_gym.stacks`): feedback rounds around the
chat-adapted episode."""

from __future__ import annotations

from ace_gym.wrapper_entry import WrapperEntry

FEEDBACK_WRAPPERS: tuple[WrapperEntry, ...] = (
    WrapperEntry("feedback_rounds", "ace_gym.feedback.feedback_rounds:FeedbackRounds", 500, {}, "feedback_rounds"),
)
""":class:`~ace_gym.feedback.FeedbackRounds`: outside the turn budget (it runs several budgeted
attempts), inside a curriculum. Its per-episode fields are summarised by
:mod:`ace_gym.feedback.metrics` from the records, not from a per-call report."""
