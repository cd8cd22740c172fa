"""The ACE grid-planning environment, one class for all six domains."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import gymnasium as gym
from gymnasium.error import ResetNeeded

from ace_gym.domains import get_domain
from ace_gym.envs.sources import DatasetSource, InstanceSource
from ace_gym.errors import ConfigError, choice, integer
from ace_gym.instance import (
    ITEM_NAMES,
    CompiledInstance,
    Dataset,
    forget_derived,
    names_rng,
    renumber_names,
    resolve_dataset,
)
from ace_gym.prompts import render_system_prompt, render_user_message
from ace_gym.scoring import grid_of_ids
from ace_gym.spaces import ToolCall, ToolCallSpace, UnicodeText
from ace_gym.text import valid_text
from ace_gym.tools import INVALID, EpisodeState, ToolConfig, echo, failure, toolset
from ace_gym.tools.compact import COMPACT_NOTE, OBSERVATIONS, compact_reply
from ace_gym.tools.replies import REPLY_INFO, failed_reply, texts_of

ActionType = Mapping[str, Any] | ToolCall
IdGrid = list[list[str | None]]
"""A grid of item ids, row by row (None = empty cell), as the published format writes it."""


class FinalScore(NamedTuple):
    """The score of a grid as an episode's last step reports it: ``score`` (1.0 or 0.0, the
    reward), ``reason`` (the first failure, or None) and ``grid`` (the id grid scored)."""

    score: float
    reason: str | None
    grid: IdGrid


class AceEnv(gym.Env[str, ActionType]):
    """ACE-Bench grid planning: fill the hidden cells of a partially completed R x C grid.

    ## Description
    Each instance is a grid of item ids (courses, dishes, components, products, activities or
    workers) with H hidden cells. Every hidden cell has K candidates: the truth, *filters* (break
    one of the cell's slot rules) and *decoys* (pass the slot rules but make the whole grid
    violate a global rule). The agent fills the hidden cells through tools; the episode is solved
    when every hidden cell passes its slot rules and the grid passes every global rule. H sets the
    horizon, the decoy budget B the difficulty. Behaviour follows the published benchmark
    (docs/compatibility.md §3-§4) call for call.

    ## Action
    One tool call: ``{"name": str, "arguments": dict | JSON string}`` or a
    :class:`ace_gym.spaces.ToolCall`. Tools (D = the domain name): ``set_slot``,
    ``get_current_grid_state``, ``get_hidden_slot_query_budget``, ``get_global_check_budget``,
    ``get_slot_id``, ``done``, ``query_D_candidate_from_attribute``, ``get_D_item_info``,
    ``get_D_item_attributes``, ``check_D_slot_constraints``, ``check_D_global_constraints``.
    Their OpenAI schemas are in ``info["tools"]`` at reset: a new list of read-only schemas that
    every episode shares (:mod:`ace_gym.tools.readonly`; ``copy.deepcopy`` gives a mutable copy).

    ## Observation
    At reset, the first user message (the partial grid, docs/compatibility.md §4.1); the system prompt is in
    ``info["system_prompt"]``. After a step, the tool's response envelope serialised exactly as
    the published benchmark sends it: ``json.dumps({"status", "messages", "data"},
    ensure_ascii=False)``. Every malformed action (unknown tool, non-object or missing arguments,
    wrong types, bad JSON) yields a ``"failed"`` envelope explaining the error; ``step`` never
    raises for an action (see Departures for where the published release raises instead).
    With ``observation="compact"`` (for training, not the benchmark) a reply is its compact form
    (:func:`~ace_gym.tools.compact.compact_reply`: minified, the success envelope and the echo of
    the arguments left out) and the system prompt ends with a note saying so
    (:data:`~ace_gym.tools.compact.COMPACT_NOTE`); ``info["reply"]`` keeps the published reply.

    ## Reward
    0 on every step except the last: a successful ``done`` (or the ``max_steps`` limit) scores the
    grid, reward 1.0 if every hidden cell passes its slot rules and every global rule holds,
    else 0.0 (docs/compatibility.md §4.3).

    ## Episode End
    Terminated by a successful ``done`` call; truncated after ``max_steps`` tool calls, with the
    same final scoring. Stepping a finished episode returns a failed envelope until ``reset``.

    ## Arguments
    ``domain``; where the instances come from, one of: ``dataset`` ("5x5", the bundled published
    benchmark, the default; "5x7"; or a path to any file in the published format, ``.json`` or
    ``.json.gz``, of at most 256 MiB of JSON: ``ace_gym.instance.MAX_DATASET_BYTES``; or what
    ``ace-gym hub export`` wrote: a ``datasets.Dataset`` of its rows, a config's folder or its
    ``.parquet`` file, docs/datasets.md), validated here (ConfigError if the path is no regular
    file or exported folder, DatasetError naming the JSON path, or the column, for a broken or
    inconsistent file; the rules are in ``ace_gym.instance``); or ``source``, any
    :class:`~ace_gym.envs.sources.InstanceSource` of the same domain
    (:class:`~ace_gym.envs.procedural.GeneratorSource` generates certified instances, see
    ``ACE-<domain>-procedural-v0``). Budgets named as in the published benchmark:
    ``extra_query_num`` (-1 = unlimited per-slot attribute queries, else active rules + H + this),
    ``global_check_alpha`` (-1 = unlimited global checks, else floor(alpha * H)),
    ``check_include_reason``, ``max_query_ids``, ``max_query_fields``; ``max_steps`` (1000);
    ``observation``: ``"full"`` (the published envelopes, the default) or ``"compact"``;
    ``item_names``: ``"published"`` (the names as the data holds them, the default) or
    ``"renumbered"`` (every reset permutes the items' name numbers, from the reset seed and the
    instance id, :func:`~ace_gym.instance.renumber_names`; truth and scores unchanged): for
    training on the published 5x5 data, whose names give the truth away (docs/compatibility.md §7).

    ## Reset options
    Read by the source: for a dataset, ``{"instance_index": int}`` or ``{"instance_id": str}``;
    without them the instance is drawn from the reset seed (same seed, same instance, in any
    process). ``{"instance": Instance}`` serves that instance of the env's domain instead, whatever
    the source (``instance_index`` -1): how wrappers serve a changed task (``UnsolvableMix``).

    ## Information
    Reset: ``domain``, ``instance_id``, ``instance_index`` (-1 when the source has no dataset),
    ``rows``, ``cols``, ``hidden_slots`` (H), ``hidden_positions``, ``decoy_budget`` (B),
    ``system_prompt``, ``tools`` (a new list of the shared read-only schemas), ``budgets``, then the
    source's own keys (a generator source: ``instance_seed``).
    Step: ``tool`` (the name called, always a str: see :func:`tool_label`), ``ok`` (envelope
    status is success), ``step``, ``reply`` (the call's :class:`~ace_gym.tools.ToolReply`, whose
    ``text`` is the observation: what wrappers read instead of parsing the text). Last step also ``score`` (float, 1.0 or 0.0, as the reward),
    ``reason`` (first failure, or None) and ``grid`` (the final id grid).

    ## Departures from the published release
    The complete list (wrappers document their own: :class:`~ace_gym.wrappers.ChatAdapter`,
    :class:`~ace_gym.wrappers.ToolFailureInjection`, :class:`~ace_gym.wrappers.StepBudget`).
    Where the release raises, ace-gym answers with a failed envelope:

    * a missing required argument: ``missing required argument(s): <names>``; an unhashable
      ``operator`` (e.g. a list): ``operator must be one of: ...`` (the release raises TypeError);
    * ``arguments`` that are not an object: ``[]``, ``0`` and ``false`` (which the release treats
      as no arguments), a non-empty list, a number or a string (the release raises TypeError) all
      get ``arguments must be a JSON object, got <type>``;
    * an argument named ``self``, and non-string keys, are ignored like any unknown argument (the
      release raises TypeError);
    * JSON text nested thousands deep (``"[" * 5000``) or holding an integer beyond Python's
      4,300-digit conversion limit (the release raises RecursionError / ValueError): as
      ``arguments`` it is ``arguments are not valid JSON (...)``, as ``ids`` ``ids string must be
      a valid JSON list``, as ``field`` one (unknown) field name, and as a set-query ``value`` one
      string, as the release treats any value that does not decode;
    * a row or col of +-inf: ``row and col must be integers`` (the release raises OverflowError).

    Where the release answers, ace-gym answers differently only here:

    * integers beyond 64 bits: a comparison value is refused (``numeric comparison values must fit
      in 64 bits``, not charged) where the release echoes it, and a row/col is shown as
      ``<N-bit integer>`` in ``Invalid slot`` messages;
    * model strings echoed in error messages are clipped to 200 characters (``...[N chars]``), and
      lone surrogates in them become U+FFFD, so that every observation encodes as UTF-8;
    * ``get_current_grid_state`` returns a copy (the release returns its live grid);
    * episodes share no mutable state (the release shares one handler per domain across threads);
    * tool schemas carry a description per parameter, an ``enum`` for ``operator`` and no spurious
      required ``kwargs`` property, in a fixed order (the release shuffles them per task);
    * a successful ``done`` ends the episode and later steps get a failed envelope until
      ``reset`` (the release's loop runs the rest of the message's calls), and ``max_steps``
      counts tool calls (the release counts model completions; see ``StepBudget``).

    ## Methods for wrappers and agents
    :meth:`score` (the current grid scored as a last step would score it), :attr:`grid` (a copy
    of the current id grid), :meth:`budgets`, :meth:`resume` (reopen an ended episode for another
    attempt, for :class:`~ace_gym.feedback.FeedbackRounds`), :attr:`compiled` and :attr:`state`
    (the current instance and episode state; solvers and tests read them, wrappers use the others).

    ## Version History
    * v0: first release, parity with the published ACE-Bench tools on its 5x5 data.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}  # noqa: RUF012 (gymnasium declares it per instance)

    def __init__(
        self,
        domain: str = "course",
        dataset: str | os.PathLike[str] | Any | None = None,
        *,
        source: InstanceSource | None = None,
        extra_query_num: int = -1,
        global_check_alpha: float | None = -1,
        check_include_reason: bool = False,
        max_query_ids: int = 5,
        max_query_fields: int = 5,
        max_steps: int = 1000,
        render_mode: str | None = None,
        observation: str = "full",
        item_names: str = "published",
    ) -> None:
        self.domain = get_domain(domain)
        self.observation = choice("observation", observation, OBSERVATIONS)
        self.item_names = choice("item_names", item_names, ITEM_NAMES)
        self.config = ToolConfig(
            extra_query_num, global_check_alpha, check_include_reason, max_query_ids, max_query_fields
        )
        self.max_steps = integer("max_steps", max_steps, minimum=1)
        self.render_mode = (
            None if render_mode is None else choice("render_mode", render_mode, self.metadata["render_modes"])
        )
        self.source = _instance_source(self.domain.name, dataset, source)
        self.tools = toolset(self.domain)
        self.observation_space = UnicodeText()
        self.action_space = ToolCallSpace(self.tools.names)
        self._state: EpisodeState | None = None
        self._steps = 0
        self._finished = False

    @property
    def dataset(self) -> Dataset | None:
        """The dataset the instances come from, or None when the source is not a dataset."""
        return self.source.dataset if isinstance(self.source, DatasetSource) else None

    # -- gymnasium API -----------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        source_info: Mapping[str, Any]
        if "instance" in options:
            compiled, index, source_info = _given_instance(options["instance"], self.domain.name), -1, {}
        else:
            compiled, index, source_info = self.source.draw(self.np_random, options)
        if self.item_names == "renumbered":
            compiled = renumber_names(compiled, names_rng(self.np_random, compiled.instance_id))
        state = self._state = EpisodeState(compiled, self.config)
        self._steps = 0
        self._finished = False
        system_prompt = self._system_prompt(compiled.task_instruction)
        if self.observation == "compact":
            system_prompt = f"{system_prompt}\n<tool_replies>\n{COMPACT_NOTE}\n</tool_replies>"
        info = {
            "domain": self.domain.name,
            "instance_id": compiled.instance_id,
            "instance_index": index,
            "rows": compiled.rows,
            "cols": compiled.cols,
            "hidden_slots": compiled.hidden_count,
            "hidden_positions": [(slot.row, slot.col) for slot in compiled.slots],
            "decoy_budget": compiled.decoy_budget,
            "system_prompt": system_prompt,
            "tools": list(self.tools.schemas),
            "budgets": self._budgets(state),
            **source_info,
        }
        return render_user_message(self.domain, texts_of(compiled).grid_json(compiled.initial_grid)), info

    def _system_prompt(self, task_instruction: str) -> str:
        """The episode's system prompt around ``task_instruction`` (budgets as configured)."""
        state, config = self._require_state(), self.config
        return render_system_prompt(
            self.domain,
            task_instruction,
            query_budget_limited=config.extra_query_num != -1,
            global_check_budget=state.global_budget,
            max_query_ids=config.max_query_ids,
            max_query_fields=config.max_query_fields,
        )

    def budgets(self) -> dict[str, Any]:
        """The configured budgets and their values on the current instance (None = unlimited)."""
        state = self._require_state()
        return self._budgets(state)

    def _budgets(self, state: EpisodeState) -> dict[str, Any]:
        config = self.config
        return {
            "extra_query_num": config.extra_query_num,
            "global_check_alpha": config.global_check_alpha,
            "check_include_reason": config.check_include_reason,
            "max_query_ids": config.max_query_ids,
            "max_query_fields": config.max_query_fields,
            "max_steps": self.max_steps,
            "global_check_budget": state.global_budget,
            "hidden_slot_query_budget": {
                f"{slot.row},{slot.col}": budget
                for slot, budget in zip(state.compiled.slots, state.query_budgets, strict=True)
            },
        }

    def step(self, action: ActionType) -> tuple[str, float, bool, bool, dict[str, Any]]:
        state = self._state
        if state is None or self._finished:
            return self._step_refused(action)
        name, arguments = _unpack(action)
        steps = self._steps = self._steps + 1
        reply = _NOT_A_CALL if name is None else self.tools.call(state, name, arguments)
        observation, ok, terminated = reply.text, reply.ok, reply.ends_episode
        if self.observation == "compact":
            observation = compact_reply(reply, arguments if isinstance(arguments, Mapping) else None)
        info: dict[str, Any] = {"tool": tool_label(name), "ok": ok, "step": steps, REPLY_INFO: reply}
        if terminated or steps >= self.max_steps:
            self._finished = True
            final = self.score()
            info["score"], info["reason"], info["grid"] = final  # FinalScore's fields, without _asdict()
            return observation, final.score, terminated, not terminated, info
        return observation, 0.0, False, False, info

    def _step_refused(self, action: ActionType) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """A step before reset (ResetNeeded) or after the episode ended (a failed envelope)."""
        self._require_state()
        return (
            EPISODE_ENDED_REPLY.text,
            0.0,
            True,
            False,
            {"tool": tool_label(_unpack(action)[0]), "ok": False, "step": self._steps, REPLY_INFO: EPISODE_ENDED_REPLY},
        )

    def render(self) -> str | None:
        if self.render_mode != "ansi" or self._state is None:
            return None
        grid = grid_of_ids(self._state.compiled, self._state.grid)
        width = max(len(i or "") for row in grid for i in row) + 1
        return "\n".join(" ".join((i or ".").rjust(width) for i in row) for row in grid) + "\n"

    # -- public methods for wrappers, solvers and tests -----------------------------------

    def score(self) -> FinalScore:
        """The current grid scored exactly as the episode's last step scores it (a wrapper that
        ends an episode early reports this); ResetNeeded before ``reset``."""
        state = self._require_state()
        reason = state.final_violation()  # evaluate_grid's verdict, from the running totals
        return FinalScore(float(reason is None), reason, grid_of_ids(state.compiled, state.grid))

    @property
    def grid(self) -> IdGrid:
        """A copy of the current grid of item ids (None = empty); ResetNeeded before ``reset``."""
        state = self._require_state()
        return grid_of_ids(state.compiled, state.grid)

    def resume(self, message: str) -> str:
        """Reopen the episode that just ended (a ``done``, or ``max_steps``) for another attempt:
        the grid and the budgets stay as they are, the ``max_steps`` count starts again. Returns
        the observation the agent sees next: a failed envelope whose ``messages`` is ``message``
        (the feedback on the submission). ResetNeeded before ``reset``."""
        self._reopen()
        return failure(message)

    def _reopen(self) -> None:
        """Let a finished episode go on with the grid and budgets as they are and a fresh step count."""
        self._require_state()
        self._finished = False
        self._steps = 0

    @property
    def state(self) -> EpisodeState:
        """The current episode's mutable state (grid, budgets); ResetNeeded before ``reset``."""
        return self._require_state()

    @property
    def compiled(self) -> CompiledInstance:
        """The current episode's compiled instance."""
        return self._require_state().compiled

    def _require_state(self) -> EpisodeState:
        if self._state is None:
            raise ResetNeeded("Cannot call this before reset()")
        return self._state


def forget_stored_replies(instances: Iterable[CompiledInstance] | None = None) -> None:
    """Forget what is kept per compiled instance for every episode on it, for ``instances`` (for
    every instance when None): what its tools build from it (see
    :class:`~ace_gym.tools.replies.InstanceTexts`). The next episode on one builds it again, as
    its first episode did; what compiling it
    built (its tables and item rows) stays. For measuring a first episode: nothing needs it to
    free memory, as the stores go with their instance."""
    forget_derived(instances)


_NOT_A_CALL = failed_reply(f'{INVALID}, an action must be a tool call {{"name": str, "arguments": object}}')
EPISODE_ENDED_REPLY = failed_reply(f"{INVALID}, the episode has ended; call reset()")
"""The reply to a step after the episode ended (wrappers that end an episode themselves answer it too)."""


def _instance_source(
    domain: str, dataset: str | os.PathLike[str] | Any | None, source: InstanceSource | None
) -> InstanceSource:
    """The env's instance source: ``source``, or a :class:`DatasetSource` over ``dataset`` ("5x5"
    when neither is given); ConfigError for both, a non-source or a source of another domain."""
    if source is None:
        return DatasetSource(resolve_dataset("5x5" if dataset is None else dataset, domain))
    if dataset is not None:
        raise ConfigError("dataset", dataset, "give a dataset or a source, not both")
    if not isinstance(source, InstanceSource):
        raise ConfigError("source", source, "must be an InstanceSource (an object with domain and draw())")
    if source.domain.name != domain:
        raise ConfigError("source", source, f"serves domain {source.domain.name!r}, not {domain!r}")
    return source


def _given_instance(instance: Any, domain: str) -> CompiledInstance:
    """The compiled form of an ``instance`` reset option; ConfigError unless it is an Instance of ``domain``."""
    from ace_gym.dataset_schema import Instance  # with pydantic, which only this option needs

    if not isinstance(instance, Instance) or instance.domain != domain:
        raise ConfigError("options['instance']", instance, f"must be an ace_gym Instance of domain {domain!r}")
    return CompiledInstance(instance, get_domain(domain))


def tool_label(name: Any) -> str:
    """``info["tool"]``: the tool name the action gave (lone surrogates as U+FFFD), or a short label
    of whatever it gave instead (``5``, ``None``, ...), so that the key always holds a str (vector
    envs batch info by type) that encodes as UTF-8."""
    return valid_text(name) if isinstance(name, str) else echo(name)


def _unpack(action: Any) -> tuple[Any, Any]:
    """(name, arguments) of an action, or (None, None) when it is not shaped like a tool call."""
    if type(action) is dict:  # the common case, without the abstract-base-class checks below
        return action.get("name"), action.get("arguments", {})
    if isinstance(action, ToolCall):
        return action.name, action.arguments
    if isinstance(action, Mapping) and "name" in action:
        return action["name"], action.get("arguments", {})
    return None, None
