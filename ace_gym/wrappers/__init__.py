"""Wrappers that turn the tool-call env into what an LLM training loop needs.

Stack them in this order (innermost first)::

    env = AceEnv("course")                     # one tool call per step
    env = ToolFailureInjection(env, rate=0.1)  # per tool call
    env = ChatAdapter(env)                     # one assistant turn per step, chat messages out
    env = ContextWindow(env, last_turns=4)     # optional: a bounded context per turn (info["context"])
    env = StepBudget(env, max_turns=50)        # a turn limit, scored on truncation
    env = FeedbackRounds(env, max_attempts=2)  # optional: AgencyBench's feedback rounds
    env = Curriculum(env, window=64)           # optional, outermost: levels of a procedural env

Planning wrappers change the tool surface (APB's settings; stack them innermost first as
:mod:`ace_gym.planning.settings` does, below the adapter)::

    CostAnnotatedTools -> ExtraneousTools -> UnsolvableMix -> BrokenTool -> Refine

For token-level rollouts, :class:`ace_gym.chat_template.ChatTokens` turns the adapter's
``info["messages"]`` into append-only prompt token ids with a Hugging Face chat template.

## Writing a wrapper

Every wrapper here follows one pattern; a new one (planning robustness, feedback rounds, a
curriculum) is written the same way and ``tests/wrappers/test_package.py`` checks it:

* **One concern, one owner per piece of state.** The core :class:`~ace_gym.envs.AceEnv` owns the
  grid, the tool budgets and the score; :class:`ChatAdapter` owns the conversation and the turn
  (it writes every message and counts turns, and runs a turn limit itself); a wrapper owns only
  what it adds (its RNG, its counters). It never reads another object's ``_private`` state and
  never edits another layer's data: it uses public methods, through ``env.unwrapped`` only
  :meth:`~ace_gym.envs.AceEnv.score`, :attr:`~ace_gym.envs.AceEnv.grid`,
  :meth:`~ace_gym.envs.AceEnv.budgets` and the read-only :attr:`~ace_gym.envs.AceEnv.compiled`,
  and ``env.get_wrapper_attr`` for a wrapper's public method (as :class:`StepBudget` hands its limit to ``ChatAdapter.limit_turns``).
* **Typed.** Subclass ``gym.Wrapper[WrapperObs, WrapperAct, Obs, Act]`` with the types it
  returns and the types of the env it wraps (tool-call layers: ``str`` observations and
  :data:`~ace_gym.envs.ace_env.ActionType` actions; chat layers: message lists and assistant
  turns).
* **Validated, then recorded.** ``__init__`` first calls
  ``gym.utils.RecordConstructorArgs.__init__(self, **every argument but env)``, as Gymnasium's
  ``TimeLimit`` does, then checks each argument with the validators of :mod:`ace_gym.errors`
  (ConfigError naming the field), then ``gym.Wrapper.__init__(self, env)``. Arguments are plain
  values, so ``env.spec`` (``spec.additional_wrappers``) rebuilds the whole stack with
  ``gym.make(env.spec)`` and serialises to JSON.
* **Never raises for an action.** A malformed action becomes an observation that explains it;
  randomness comes from a generator seeded by ``reset(seed=...)``.
"""

from ace_gym.wrappers.chat_adapter import ChatAdapter
from ace_gym.wrappers.chat_spaces import AssistantTurn, ChatMessages
from ace_gym.wrappers.context_window import ContextWindow, context_messages
from ace_gym.wrappers.curriculum import Curriculum
from ace_gym.wrappers.failure_injection import FAILURE_ENVELOPES, ToolFailureInjection
from ace_gym.wrappers.step_budget import StepBudget, TurnLimit

__all__ = [
    "FAILURE_ENVELOPES",
    "AssistantTurn",
    "ChatAdapter",
    "ChatMessages",
    "ContextWindow",
    "Curriculum",
    "StepBudget",
    "ToolFailureInjection",
    "TurnLimit",
    "context_messages",
]
