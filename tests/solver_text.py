"""The exact solver as a text-writing model: for framework adapters that take the model's text."""

from __future__ import annotations

import re

from ace_gym.agents import ExactSolver
from ace_gym.envs import AceEnv
from ace_gym.eval import EpisodeSpec
from tests.steering import hermes_call

_LAST_REPLY = re.compile(r"<tool_response>\n(.*)\n</tool_response>", re.S)


class SolverText:
    """Plays ``spec``'s episode: each turn one of the solver's calls as Hermes text, fed the
    previous call's tool reply (as given, or as the last ``<tool_response>`` of a rendered prompt)."""

    def __init__(self, spec: EpisodeSpec) -> None:
        observation, info = AceEnv(spec.domain, spec.dataset).reset(seed=spec.seed, options=spec.reset_options())
        self.episode = ExactSolver().start(observation, info, seed=0)

    def next_text(self, last_reply: str = "") -> str:
        call = self.episode.act(last_reply)
        return hermes_call(call["name"], **call["arguments"])

    def next_text_after(self, rendered: str) -> str:
        replies = _LAST_REPLY.findall(rendered.rsplit("<|im_start|>assistant", 2)[-2])
        return self.next_text(replies[-1] if replies else "")
