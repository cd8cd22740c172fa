"""``ALB-QA-v0``: one question about a long simulated agent history, answered in one step."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
from gymnasium.error import ResetNeeded

from ace_gym.errors import choice, flag
from ace_gym.longbench.question_types import NUMBER_TYPES, resolve_question_types
from ace_gym.longbench.render import transcript
from ace_gym.longbench.samples import (
    TRAINING_ANSWERS,
    InfeasibleSample,
    Sample,
    build_sample,
    choose_question_type,
    config_from_options,
)
from ace_gym.longbench.scoring import extract_answer, is_well_formed, parse_prediction, score_prediction
from ace_gym.runs.answer_keys import QA_GOLD
from ace_gym.runs.tokens import Tokenizer, resolve_tokenizer
from ace_gym.spaces import UnicodeText
from ace_gym.text import valid_text
from ace_gym.wrappers.chat_spaces import ChatMessages

REWARDS: tuple[str, ...] = ("strict", "official", "relative_error")
RENDERS: tuple[str, ...] = ("messages", "text")
FORCED_TYPE_SEEDS = 4
"""Sample seeds a reset that forces a question type tries before it raises InfeasibleSample."""


class ALBQAEnv(gym.Env[Any, str]):
    """AgentLongBench question answering over procedurally generated agent histories.

    ## Description
    Each reset builds one sample from the reset seed: a rollout of a simulated investigator
    playing a guess-the-item game (tool queries, guesses, attribute feedback), cut at a round
    boundary to fit ``target_tokens``, and one question of the eight AgentLongBench types about
    it, with an exact answer. See ``docs/longbench.md`` for what is the paper's and what is ours.
    The type is drawn per reset with the ``question_types`` probabilities; a type the budget fits
    no sample of at that seed (a small ``target_tokens`` leaves too few rounds for some types) is
    drawn again among the other types, so a reset fails only when none fits.

    ## Action
    The model's answer text (the answer inside ``<answer>...</answer>``), or an assistant message
    dict whose ``content`` is that text. Anything else scores 0 with ``info["error"]``.

    ## Observation
    ``render="messages"``: the chat messages ``[system, history..., user question]`` (tool calls
    in OpenAI format); ``render="text"``: the same as one flat transcript string.

    ## Reward
    ``reward="strict"`` (the default, for training): the official metric of an answer of the form
    its question type asks for, 0 for any other (:func:`~ace_gym.longbench.scoring.strict_score`:
    a yes/no answer must begin with yes/no/true/false, so garbage that the official parsing reads
    as "no" earns nothing). ``"official"``: the official metric of the question type (exact
    match; 1 / 0.5 / 0 for Find Target Offsets; set F1 for verbose Intersection), with the official
    answer parsing: the paper's numbers. ``"relative_error"`` (not official): for number answers
    ``max(0, 1 - |pred - gold| / max(1, |gold|))``, otherwise the strict score.
    ``require_answer_tag=False`` (not official) reads an answer without tags as if it were
    wrapped in them. Floor: an empty, untagged or malformed answer scores 0 under every reward
    but ``"official"``; a yes/no answer scores chance level (the share of questions whose truth
    it names).

    ## Episode End
    Terminated after the one step. Stepping again returns reward 0 until ``reset``.

    ## Arguments
    ``fmt`` ("concise" | "verbose"), ``knowledge`` ("kf" | "ki"), ``table`` ("synthetic",
    "ace:<domain>", "pokemon", "csv:<path>"), ``table_seed``, ``target_tokens`` (a bucket label
    such as "128k" or a token count), ``question_types`` ("all", "paper", a label/slug or a list),
    ``tokenizer`` (None, "approx", "hf:<local dir>" or an object with ``count``), ``behaviour``
    (investigator parameters, see :class:`~ace_gym.longbench.simulator.Behaviour`),
    ``question_reserve``, ``min_list``, ``max_answer_items``, ``evidence_position``, ``render``,
    ``require_answer_tag``, ``reward``, ``answers`` ("balanced", the default for training: no
    answer is predictable from the question type, see :mod:`ace_gym.longbench.samples`; "paper":
    the paper's question forms, what ``ace-gym eval`` and the official layout use).

    ## Information
    Reset and step: ``question_type`` (official label), ``question``, ``evidence`` (message
    positions in the observation), ``acl_sum``, ``acl_span``,
    ``evidence_depth``, ``tokens`` (observation size), ``target_tokens``, ``bucket``,
    ``knowledge``, ``format``, ``table``, ``rounds``, ``games``, ``seed``, ``attempt`` and the
    official ``round`` / ``i_round`` / ``j_round`` when the question names rounds. Step also (the
    episode has ended): ``gt`` (the gold answer), ``prediction`` (parsed answer), ``official_score`` (the official metric; None if the gold does
    not parse: what the paper-comparable reports read), ``score`` (the reward's verdict: the
    official score for ``reward="official"``, else the strict score; None with the gold).

    The gold answer is never in the reset ``info``, which a harness may pass on to the model; a
    grader reads it by name, :meth:`answer_key`, and scores an answer without ending the episode with :meth:`grade`.

    ## Version History
    * v0: first release; the ``"strict"`` reward became the default with ``info["official_score"]``
      (issue 29: the official reading paid garbage on yes/no questions); ``answers="balanced"``
      became the default and the reset ``info`` lost ``gt`` (issue 38).
    """

    metadata = {"render_modes": []}  # noqa: RUF012 (gymnasium declares it per instance)

    def __init__(
        self,
        fmt: str = "concise",
        knowledge: str = "kf",
        table: str = "synthetic",
        *,
        table_seed: int = 0,
        target_tokens: int | str = 32768,
        question_types: str | Sequence[str] = "all",
        tokenizer: str | Tokenizer | None = None,
        behaviour: Mapping[str, Any] | None = None,
        question_reserve: int = 256,
        min_list: int = 2,
        max_answer_items: int = 50,
        evidence_position: float | None = None,
        render: str = "messages",
        require_answer_tag: bool = True,
        reward: str = "strict",
        answers: str = TRAINING_ANSWERS,
    ) -> None:
        choice("render", render, RENDERS)
        choice("reward", reward, REWARDS)
        require_answer_tag = flag("require_answer_tag", require_answer_tag)
        self.config = config_from_options(
            {
                "table": table,
                "table_seed": table_seed,
                "knowledge": knowledge,
                "fmt": fmt,
                "target_tokens": target_tokens,
                "behaviour": behaviour,
                "question_reserve": question_reserve,
                "min_list": min_list,
                "max_answer_items": max_answer_items,
                "evidence_position": evidence_position,
                "answers": answers,
            }
        )
        self.types, self.probabilities = resolve_question_types(question_types)
        self.tokenizer = resolve_tokenizer(tokenizer)
        self.table = self.config.resolve_table()[0]
        self.render_as, self.reward_kind, self.require_answer_tag = render, reward, require_answer_tag
        self.observation_space = ChatMessages() if render == "messages" else UnicodeText()
        self.action_space = UnicodeText()
        self.sample: Sample | None = None
        self._answered = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Build the sample of the seed; ``options={"question_type": label}`` forces the type
        (ConfigError when the budget fits no sample of it for this seed, :meth:`_forced_sample`)."""
        super().reset(seed=seed)
        sample_seed = int(self.np_random.integers(2**63 - 1))
        options = options or {}
        if "question_type" in options:
            question_type = resolve_question_types(options["question_type"])[0][0]
            self.sample = self._forced_sample(question_type, sample_seed)
        else:
            self.sample = self._drawn_sample(sample_seed)
        self._answered = False
        messages = self.sample.observation()
        info = self.sample.info()
        # the answer key stays with the grader (answer_key); in the step's info once the episode has ended
        del info[QA_GOLD]
        return (messages if self.render_as == "messages" else transcript(messages)), info

    def answer_key(self) -> Any:
        """The gold answer of the current question, for a grader (never in the reset ``info``);
        ResetNeeded before ``reset``."""
        if self.sample is None:
            raise ResetNeeded("Cannot call answer_key() before reset()")
        return self.sample.question.answer

    def _forced_sample(self, question_type: str, sample_seed: int) -> Sample:
        """A sample of ``question_type``: of ``sample_seed``, or, where the budget fits none at that
        seed (a balanced aim its histories cannot carry), of up to :data:`FORCED_TYPE_SEEDS` - 1
        further seeds drawn from the reset's generator; InfeasibleSample when none fits."""
        for _ in range(FORCED_TYPE_SEEDS - 1):
            try:
                return build_sample(self.config, question_type, sample_seed, self.tokenizer, table=self.table)
            except InfeasibleSample:
                sample_seed = int(self.np_random.integers(2**63 - 1))
        return build_sample(self.config, question_type, sample_seed, self.tokenizer, table=self.table)

    def _drawn_sample(self, sample_seed: int) -> Sample:
        """A sample of a type drawn with the configured probabilities. A type the budget fits no
        sample of at this seed is set aside and the type drawn again among the others (from the
        same seeded generator, so the outcome is a function of the seed); InfeasibleSample only
        when no configured type fits."""
        types, probabilities = self.types, self.probabilities
        while True:
            question_type = choose_question_type(types, probabilities, self.np_random)
            try:
                return build_sample(self.config, question_type, sample_seed, self.tokenizer, table=self.table)
            except InfeasibleSample:
                kept = [(t, p) for t, p in zip(types, probabilities, strict=True) if t != question_type and p > 0]
                if not kept:
                    raise
                total = sum(p for _, p in kept)
                types, probabilities = tuple(t for t, _ in kept), tuple(p / total for _, p in kept)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if self.sample is None:
            raise ResetNeeded("Cannot call step() before reset()")
        observation: Any = [] if self.render_as == "messages" else ""
        if self._answered:
            info = self.sample.info()
            info.update(prediction=None, score=None, official_score=None, error="the episode has ended; call reset()")
            return observation, 0.0, True, False, info
        self._answered = True
        reward, info = self.grade(action)
        return observation, reward, True, False, info

    def grade(self, action: Any) -> tuple[float, dict[str, Any]]:
        """The reward and step ``info`` that ``action`` earns on the current question, without
        ending the episode (a grader's view, like :meth:`answer_key`); ResetNeeded before ``reset``."""
        if self.sample is None:
            raise ResetNeeded("Cannot call grade() before reset()")
        info = self.sample.info()
        text = action.get("content") if isinstance(action, Mapping) else action
        if not isinstance(text, str):
            info.update(
                prediction=None, score=0.0, official_score=0.0, error="an action must be the answer text (a str)"
            )
            return 0.0, info
        text = valid_text(text)  # the prediction, parsed from it, goes into info
        if not self.require_answer_tag and extract_answer(text) is None:
            text = f"<answer>{text}</answer>"
        scored_as, fmt = self.sample.question.scored_as, self.config.fmt
        prediction = parse_prediction(scored_as, fmt, text)
        official = score_prediction(scored_as, fmt, self.config.knowledge, info[QA_GOLD], prediction)
        score = official
        if self.reward_kind != "official" and official is not None and not is_well_formed(scored_as, fmt, text):
            score = 0.0
        reward = 0.0 if score is None else score
        if self.reward_kind == "relative_error" and scored_as in NUMBER_TYPES and isinstance(prediction, int):
            gold = int(info[QA_GOLD])
            reward = max(0.0, 1.0 - abs(prediction - gold) / max(1, abs(gold)))
        info.update(prediction=prediction, score=score, official_score=official)
        return float(reward), info
