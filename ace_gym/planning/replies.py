"""What the planning wrappers answer, in one place: the wrappers build their replies here and
scripted agents recognise them here.

Every reply is a :class:`~ace_gym.tools.ToolReply` whose text is an ACE envelope
(``{"status", "messages", "data"}``) written by the tool layer's encoder; a wrapper returns its
``text`` as the observation and the reply itself in ``info["reply"]`` (:func:`ace_gym.planning.surface.answered`).
The persistent failure of a broken tool and the outage of a compliance tool are worded apart
from the *transient* failures :class:`~ace_gym.wrappers.ToolFailureInjection` injects (``Tool
call failed``, ``Timeout, ...``), so that an agent can tell when retrying may help and when it cannot.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ace_gym.agents.task_view import REVIEW  # error type of a call held back for review (Refine)
from ace_gym.agents.task_view import is_review as is_review  # re-exported: the agent side reads it
from ace_gym.tools import ToolReply, failed_reply
from ace_gym.tools.replies import ok_reply


def success(data: Mapping[str, Any]) -> ToolReply:
    """A success reply around ``data`` (a JSON-serialisable mapping, written by the tool layer's encoder)."""
    return ok_reply(data)


BROKEN = "Service error"
"""Error type of a broken tool's persistent failure (``BrokenTool``)."""
OUTAGE = "Outage"
"""Error type of the compliance tool in outage (``UnsolvableMix``, tool_outage)."""
UNAVAILABLE = "Unavailable"
"""Error type of a distractor with ``behaviour="error"`` (``ExtraneousTools``)."""


def broken(tool: str, replacement: str | None = None) -> ToolReply:
    """The persistent failure of ``tool``; ``replacement`` named when given (a hint)."""
    hint = f"; {replacement} does the same job" if replacement else ""
    return failed_reply(f"{BROKEN}, {tool} is out of service for the rest of this task and will not recover{hint}")


def outage(tool: str) -> ToolReply:
    return failed_reply(f"{OUTAGE}, {tool} is unavailable: the approval service is down for the rest of this task")


def unavailable(tool: str) -> ToolReply:
    return failed_reply(f"{UNAVAILABLE}, {tool} has no data for this task")


def review(critique: str) -> ToolReply:
    """A held-back proposal: the critique, then how to proceed."""
    return failed_reply(f"{REVIEW}, your proposed call was held back for review. {critique}")


def is_persistent_failure(messages: object) -> bool:
    """Whether an envelope's ``messages`` is a broken tool's failure or an outage."""
    return isinstance(messages, str) and messages.startswith((f"{BROKEN}, ", f"{OUTAGE}, "))


def no_attachment() -> ToolReply:
    return success({"attachment": None, "message": "No file is attached to this task."})


NOT_APPROVED = "Not approved"
"""Error type of a ``set_slot`` the approval policy blocks (``UnsolvableMix``)."""


def not_approved(tool: str, approval_tool: str) -> ToolReply:
    return failed_reply(
        f"{NOT_APPROVED}, the task policy requires `{approval_tool}` for this row, col and id before `{tool}`; "
        "nothing was set"
    )


def approved(row: Any, col: Any, item: Any) -> ToolReply:
    return success({"approved": True, "row": row, "col": col, "id": item})


def attachment(sheet: str) -> ToolReply:
    return success({"attachment": sheet, "message": "The attached sheet holds the rules of some hidden slots."})
