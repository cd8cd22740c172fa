"""Wrappers that turn the tool-call env into what an LLM training loop needs.

Stack them in this order (innermost first)::

    env = AceEnv("course")                     # one tool call per step
    env = ToolFailureInjection(env, rate=0.1)  # per tool call
    env = ChatAdapter(env)                     # one assistant turn per step, chat messages out
    env = StepBudget(env, max_turns=50)        # counts assistant turns, scores on truncation
    env = FeedbackRounds(env, max_attempts=2)  # optional: AgencyBench's feedback rounds

For token-level rollouts, :class:`ace_gym.chat_template.ChatTokens` turns the adapter's
``info["messages"]`` into append-only prompt token ids with a Hugging Face chat template.
"""

from ace_gym.wrappers.chat_adapter import ChatAdapter
from ace_gym.wrappers.chat_spaces import AssistantTurn, ChatMessages
from ace_gym.wrappers.failure_injection import FAILURE_ENVELOPES, ToolFailureInjection
from ace_gym.wrappers.feedback_rounds import FeedbackRounds
from ace_gym.wrappers.step_budget import StepBudget

__all__ = [
    "FAILURE_ENVELOPES",
    "AssistantTurn",
    "ChatAdapter",
    "ChatMessages",
    "FeedbackRounds",
    "StepBudget",
    "ToolFailureInjection",
]
