"""Wrappers that turn the tool-call env into what an LLM training loop needs.

Stack them in this order (innermost first)::

    env = AceEnv("course")                     # one tool call per step
    env = ToolFailureInjection(env, rate=0.1)  # per tool call
    env = ChatAdapter(env)                     # one assistant turn per step, chat messages out
    env = StepBudget(env, max_turns=50)        # counts assistant turns, scores on truncation

Planning wrappers change the tool surface (APB's settings; stack them innermost first as
:mod:`ace_gym.planning.settings` does, below the adapter)::

    CostAnnotatedTools -> ExtraneousTools -> UnsolvableMix -> BrokenTool -> Refine

For token-level rollouts, :class:`ace_gym.chat_template.ChatTokens` turns the adapter's
``info["messages"]`` into append-only prompt token ids with a Hugging Face chat template.
"""

from ace_gym.wrappers.broken_tool import BrokenTool
from ace_gym.wrappers.chat_adapter import ChatAdapter
from ace_gym.wrappers.chat_spaces import AssistantTurn, ChatMessages
from ace_gym.wrappers.cost_annotated_tools import CostAnnotatedTools
from ace_gym.wrappers.extraneous_tools import ExtraneousTools
from ace_gym.wrappers.failure_injection import FAILURE_ENVELOPES, ToolFailureInjection
from ace_gym.wrappers.refine import Refine
from ace_gym.wrappers.step_budget import StepBudget
from ace_gym.wrappers.unsolvable_mix import UnsolvableMix

__all__ = [
    "FAILURE_ENVELOPES",
    "AssistantTurn",
    "BrokenTool",
    "ChatAdapter",
    "ChatMessages",
    "CostAnnotatedTools",
    "ExtraneousTools",
    "Refine",
    "StepBudget",
    "ToolFailureInjection",
    "UnsolvableMix",
]
