"""The ACE tool layer (docs/compatibility.md §3), in six modules with one concern each:

* :mod:`~ace_gym.domains.tool_names`: the one table of tool names (a stable key per tool, its public
  name in each domain);
* :mod:`~ace_gym.tools.state`: the budgets (:class:`ToolConfig`) and the mutable state of one
  episode (:class:`EpisodeState`: grid, running totals, budget counters);
* :mod:`~ace_gym.tools.functions`: the eleven tools, one function each, with argument coercion;
* :mod:`~ace_gym.tools.replies`: what a call returns (:class:`ToolReply`: envelope text, ok,
  ends_episode, charged) and the per-instance cache of serialised pieces;
* :mod:`~ace_gym.tools.dispatch`: the key -> function table, schemas and the dispatcher
  (:func:`toolset`, :meth:`ToolSet.call`);
* :mod:`~ace_gym.tools.readonly`: the read-only ``dict``/``list`` types of the tool schemas that
  every episode shares (``copy.deepcopy`` gives a mutable copy).

The tool layer imports the domain declarations and the constraint code, never the env, the
wrappers or the instance loader (it only reads a :class:`~ace_gym.instance.CompiledInstance`).
"""

from ace_gym.domains.tool_names import TOOL_KEYS, TOOL_NAMES, ToolKey, tool_key, tool_name, tool_names
from ace_gym.tools.dispatch import Tool, ToolSet, toolset
from ace_gym.tools.functions import OPERATORS, Operator
from ace_gym.tools.replies import (
    ECHO_LIMIT,
    INVALID,
    REPLY_INFO,
    STOP,
    TOOL_CALL_FAILED,
    Charge,
    ToolReply,
    echo,
    failed_reply,
    failure,
    reply_in,
    valid_text,
)
from ace_gym.tools.state import MAX_GLOBAL_CHECK_ALPHA, EpisodeState, ToolConfig

__all__ = [
    "ECHO_LIMIT",
    "INVALID",
    "MAX_GLOBAL_CHECK_ALPHA",
    "OPERATORS",
    "REPLY_INFO",
    "STOP",
    "TOOL_CALL_FAILED",
    "TOOL_KEYS",
    "TOOL_NAMES",
    "Charge",
    "EpisodeState",
    "Operator",
    "Tool",
    "ToolConfig",
    "ToolKey",
    "ToolReply",
    "ToolSet",
    "echo",
    "failed_reply",
    "failure",
    "reply_in",
    "tool_key",
    "tool_name",
    "tool_names",
    "toolset",
    "valid_text",
]
