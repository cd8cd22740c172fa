"""Golden-trajectory replay: play a recorded episode's actions again and check the env answers alike.

Every ACE record of :func:`~ace_gym.eval.rollout.run_episodes` carries what its replay needs
(docs/replay.md): each turn's ``action`` as it was played (a model's text or assistant message, a
scripted call as an assistant message with one native tool call) and ``replay``: the
:class:`~ace_gym.eval.episode_spec.EpisodeSpec` (its env stack, instance, seed and trial), the
package version and the dataset file's SHA-256. A replay rebuilds the stack, resets it with the
recorded seed and sends the recorded actions through it; the conversation (every observation),
each turn's reward and info, and the end (score, reason, grid, termination, feedback rounds,
scenario log) must be identical. The first difference is reported with its turn. A record written
before issue 41 states the spec in its former fields and the stack as ``env.spec`` named it:
:func:`spec_of_old_record` is the one place that reads it.

:class:`ReplayPolicy` is the actor that does it inside :func:`~ace_gym.eval.rollout.run_episodes`
(it raises :class:`ReplayDiverged` at the first difference it sees); :func:`replay_record` runs
one record and returns its first :class:`ReplayMismatch` or None; ``ace-gym replay RUN_DIR`` runs
a whole run (exit 0 when every episode replays identically, 6 on a mismatch, 2 for a record that
cannot be replayed). A run's episode key is replayed once: a later record with a key an earlier one
has is left out with a note.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ace_gym import __version__
from ace_gym.errors import ConfigError, did_you_mean
from ace_gym.eval.episode_spec import EpisodeSpec
from ace_gym.eval.records import stack_fields
from ace_gym.eval.rollout import run_episodes
from ace_gym.exit_codes import EXIT_OK, EXIT_REPLAY_MISMATCH
from ace_gym.feedback.rounds import AGENCYBENCH_THRESHOLD
from ace_gym.feedback.scenario import ScenarioEnv
from ace_gym.instance import dataset_sha256
from ace_gym.runs.loop import INFO_DROPPED, Actor, Episode, Turn
from ace_gym.runs.results import EPISODES_FILE, duplicates_note, read_records
from ace_gym.text import clipped

ENDING_FIELDS = (
    "instance_id",
    "instance_index",
    "hidden_slots",
    "decoy_budget",
    "env_config",
    "tools",
    "messages",
    "score",
    "reason",
    "terminated",
    "truncated",
    "grid",
    "feedback_rounds",
    "scenario",
)
"""Record fields a replay must reproduce besides the turns (the policy's own fields, ``usage``,
``notes`` and ``tokens``, are not the env's answers and are not compared)."""

SPEC_FIELDS = ("dataset", "domain", "seed", "trial", "tool_failure_rate", "max_turns", "settings")
"""Top-level record fields that restate the recorded spec (:func:`~ace_gym.eval.records.stack_fields`,
the seed and the trial): each must equal the rebuilt spec's before anything is replayed (a record
edited there describes another episode than it replays)."""

TURN_FIELDS = ("action", "reward", "info", "context")
"""Per-turn fields a replay must reproduce (token counts and ids are the engine's, not compared);
``context``: under a context policy, what the model was shown for the turn (absent otherwise)."""


@dataclass(frozen=True)
class ReplayMismatch:
    """The first difference between a recorded episode and its replay: the episode ``key``, the
    ``turn`` (index into the record's ``turns``; None before the first turn: the env
    configuration or the opening messages), the ``field`` that differs and both values."""

    key: str
    turn: int | None
    field: str
    recorded: Any
    replayed: Any

    def describe(self) -> str:
        where = "before the first turn" if self.turn is None else f"at turn {self.turn}"
        return (
            f"{self.key}: {where}, {self.field} differs: recorded {clipped(self.recorded, 160)}, "
            f"replayed {clipped(self.replayed, 160)}"
        )


class ReplayDiverged(Exception):
    """Raised by :class:`ReplayPolicy` when a replay first differs from its record."""

    def __init__(self, mismatch: ReplayMismatch) -> None:
        super().__init__(mismatch.describe())
        self.mismatch = mismatch


def replay_spec(record: Mapping[str, Any]) -> EpisodeSpec:
    """The spec a record was played under, once the record is known to hold what a replay reads:
    ConfigError naming the field when it carries no replay fields (written before records
    carried ``replay``, or by a vector env, whose episodes have no spec), or its ``turns`` are
    not a list of objects with an ``action``, or its ``messages`` not a list."""
    fields = _replay_fields(record)
    if _is_old_record(record):
        return spec_of_old_record(fields, record)
    return EpisodeSpec.from_dict(fields["spec"])


def _replay_fields(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """The record's ``replay`` fields, after :func:`replay_spec`'s checks."""
    fields = record.get("replay")
    if not isinstance(fields, Mapping) or not isinstance(fields.get("spec"), Mapping):
        raise ConfigError(
            "record", record.get("key"), "carries no replay fields (a vector-env episode, or an older record)"
        )
    turns = record.get("turns")
    if not isinstance(turns, list) or not all(isinstance(turn, Mapping) and "action" in turn for turn in turns):
        raise ConfigError("record", record.get("key"), "has no 'turns' list of objects with an 'action' to replay")
    if not isinstance(record.get("messages"), list):
        raise ConfigError("record", record.get("key"), "has no 'messages' list to compare the replay with")
    return fields


def _is_old_record(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` was written before issue 41 (its spec states no ``stack``)."""
    return "stack" not in record["replay"]["spec"]


def spec_of_old_record(fields: Mapping[str, Any], record: Mapping[str, Any]) -> EpisodeSpec:
    """The spec of a record written before issue 41, whose ``replay.spec`` holds the former
    fields of EpisodeSpec (``domain``, ``dataset``, ``instance_index``, ``instance_id``, ``seed``,
    ``trial``, ``tool_failure_rate``, ``env_kwargs``, ``max_turns``, ``settings``, ``scenario``,
    ``feedback_rounds``, ``failure_injection``, ``context``: the arguments of
    :meth:`EpisodeSpec.of`, which builds the stack they played), with the threshold, reward and
    failure draws it was played with (:func:`_played_threshold`, :func:`_played_reward`,
    :func:`_played_draws`); ConfigError for fields that are no such spec."""
    played = _played_reward(_played_draws(_played_threshold(fields["spec"], record), fields.get("env_spec")))
    try:
        return EpisodeSpec.of(**played)
    except TypeError as error:  # a field the former EpisodeSpec did not have
        raise ConfigError("replay.spec", dict(played), f"is not an EpisodeSpec of a former record ({error})") from None


def _played_threshold(spec: Mapping[str, Any], record: Mapping[str, Any]) -> Mapping[str, Any]:
    """``spec`` with the pass threshold its feedback rounds were played at. A spec written before
    FeedbackRounds' default became ACE's verdict (1.0) names no threshold, and relied on the old
    default, AgencyBench's 0.6, which the record's own ``feedback_rounds`` log states."""
    rounds = spec.get("feedback_rounds")
    if not isinstance(rounds, Mapping) or "threshold" in rounds:
        return spec
    played = (record.get("feedback_rounds") or {}).get("threshold", AGENCYBENCH_THRESHOLD)
    return {**spec, "feedback_rounds": {**rounds, "threshold": played}}


OLD_ENTRY_POINTS: dict[str, str] = {
    "ace_gym.envs.scenario:ScenarioEnv": "ace_gym.feedback.scenario:ScenarioEnv",
    "ace_gym.wrappers.broken_tool:BrokenTool": "ace_gym.planning.broken_tool:BrokenTool",
    "ace_gym.wrappers.cost_annotated_tools:CostAnnotatedTools": (
        "ace_gym.planning.cost_annotated_tools:CostAnnotatedTools"
    ),
    "ace_gym.wrappers.extraneous_tools:ExtraneousTools": "ace_gym.planning.extraneous_tools:ExtraneousTools",
    "ace_gym.wrappers.feedback_rounds:FeedbackRounds": "ace_gym.feedback.feedback_rounds:FeedbackRounds",
    "ace_gym.wrappers.refine:Refine": "ace_gym.planning.refine:Refine",
    "ace_gym.wrappers.unsolvable_mix:UnsolvableMix": "ace_gym.planning.unsolvable_mix:UnsolvableMix",
}
"""Entry points that records written before issue 28 (e.g. at 7123f6b) name, by the class's
current entry point (the moves are listed in CHANGELOG.md)."""


def _played_reward(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    """``spec`` with the reward its feedback rounds or scenario were played for. A spec written
    before the verdict became their default reward (issue 38) names no ``final_reward``, and
    relied on the old default, the rubric's share (``"final"``)."""
    played = dict(spec)
    for name in ("feedback_rounds", "scenario"):
        protocol = spec.get(name)
        if isinstance(protocol, Mapping) and "final_reward" not in protocol:
            played[name] = {**protocol, "final_reward": "final"}
    return played


SCENARIO_ENTRY_POINT = f"{ScenarioEnv.__module__}:{ScenarioEnv.__name__}"


def _scenario_reward_named(env_spec: Any) -> Any:
    """``env_spec`` with the ``final_reward`` a scenario env was made with: a scenario recorded
    before issue 38 names none in its kwargs (:func:`_played_reward` replays it with ``"final"``)."""
    kwargs = env_spec.get("kwargs") if isinstance(env_spec, Mapping) else None
    if env_spec is None or env_spec.get("entry_point") != SCENARIO_ENTRY_POINT or not isinstance(kwargs, Mapping):
        return env_spec
    return {**env_spec, "kwargs": {"final_reward": "final", **kwargs}}


def _played_draws(spec: Mapping[str, Any], env_spec: Any) -> Mapping[str, Any]:
    """``spec`` with the failure draws it was played with. A stack recorded before failure
    injection drew per episode (issue 40) names no ``draws``: its failures were drawn from the
    reset seed alone, and its replay draws so again."""
    if _recorded_without_draws(env_spec):
        return {**spec, "failure_injection": {**(spec.get("failure_injection") or {}), "draws": "reset_seed"}}
    return spec


def _recorded_without_draws(env_spec: Any) -> bool:
    """Whether a recorded ``env_spec`` holds a ToolFailureInjection that names no ``draws``."""
    wrappers = env_spec.get("additional_wrappers") if isinstance(env_spec, Mapping) else None
    return isinstance(wrappers, list) and any(
        isinstance(wrapper, Mapping)
        and wrapper.get("name") == "ToolFailureInjection"
        and isinstance(wrapper.get("kwargs"), Mapping)
        and "draws" not in wrapper["kwargs"]
        for wrapper in wrappers
    )


def _with_played_draws(env_spec: Any) -> Any:
    """A recorded ``env_spec`` naming the draws its failure injection made (:func:`_played_draws`)."""
    if not _recorded_without_draws(env_spec):
        return env_spec
    wrappers = [
        {**wrapper, "kwargs": {**wrapper["kwargs"], "draws": "reset_seed"}}
        if isinstance(wrapper, Mapping) and wrapper.get("name") == "ToolFailureInjection"
        else wrapper
        for wrapper in env_spec["additional_wrappers"]
    ]
    return {**env_spec, "additional_wrappers": wrappers}


def current_entry_points(env_spec: Any) -> Any:
    """``env_spec`` (a Gymnasium env spec as JSON values) with every old entry point of the env and
    its wrappers (:data:`OLD_ENTRY_POINTS`) replaced by the current one, so a record written before
    a class moved names the same stack. Nothing is imported; other values are returned as they are."""
    if not isinstance(env_spec, Mapping):
        return env_spec
    found = {**env_spec, "entry_point": _current_entry_point(env_spec.get("entry_point"))}
    wrappers = env_spec.get("additional_wrappers")
    if isinstance(wrappers, list):
        found["additional_wrappers"] = [
            {**w, "entry_point": _current_entry_point(w.get("entry_point"))} if isinstance(w, Mapping) else w
            for w in wrappers
        ]
    return found


def _current_entry_point(entry_point: Any) -> Any:
    """The current name of an old entry point; anything else as it is."""
    return OLD_ENTRY_POINTS.get(entry_point, entry_point) if isinstance(entry_point, str) else entry_point


class ReplayPolicy(Actor):
    """Plays the recorded actions of ``records`` (matched by episode key) and checks, before each
    action, that the env stack is the recorded one (at the start), and that the conversation so
    far and the last turn's action, reward and info are the recorded ones; raises
    :class:`ReplayDiverged` at the first difference, or when the episode goes on after the
    recorded one ended. The last turn and the end are checked by :func:`compare_records` on the
    finished record. An episode whose key no record has is a ConfigError."""

    def __init__(self, records: Iterable[Mapping[str, Any]]) -> None:
        self.records = {str(record["key"]): record for record in records}

    def start(self, episode: Episode, observation: Any, info: Mapping[str, Any]) -> None:
        record = self.records.get(episode.key)
        if record is None:
            raise ConfigError(
                "episode", episode.key, f"no record has this key{did_you_mean(episode.key, self.records)}"
            )
        if "env_spec" in (record.get("replay") or {}):  # a record written before issue 41: the stack
            self._check_env_spec(episode, record)  # as env.spec named it, to compare with today's
        episode.agent = _Progress(record)
        episode.agent.check_messages(episode)

    @staticmethod
    def _check_env_spec(episode: Episode, record: Mapping[str, Any]) -> None:
        recorded_stack = _with_played_draws(record["replay"]["env_spec"])
        stack = getattr(episode.env, "spec", None)
        replayed_stack = None if stack is None else json.loads(stack.to_json())
        if _scenario_reward_named(current_entry_points(recorded_stack)) != current_entry_points(replayed_stack):
            raise ReplayDiverged(ReplayMismatch(episode.key, None, "env_spec", recorded_stack, replayed_stack))

    def act(self, episodes: Sequence[Episode]) -> list[Turn]:
        turns = []
        for episode in episodes:
            progress: _Progress = episode.agent
            progress.check_messages(episode)
            played = len(episode.turns)
            if played:
                progress.check_turn(episode.key, played - 1, episode.turns[-1])
            recorded_turns = progress.record["turns"]
            if played >= len(recorded_turns):
                raise ReplayDiverged(ReplayMismatch(episode.key, played, "turns", "the episode ended", "it goes on"))
            turns.append(Turn(recorded_turns[played]["action"]))
        return turns


class _Progress:
    """How far a replayed episode has been checked against its record."""

    def __init__(self, record: Mapping[str, Any]) -> None:
        self.record = record
        self.checked_messages = 0

    def check_messages(self, episode: Episode) -> None:
        recorded = self.record["messages"]
        replayed = _plain(episode.messages[self.checked_messages :])
        turn = len(episode.turns) - 1 if episode.turns else None
        for offset, message in enumerate(replayed):
            index = self.checked_messages + offset
            expected = recorded[index] if index < len(recorded) else None
            if message != expected:
                raise ReplayDiverged(ReplayMismatch(episode.key, turn, f"messages[{index}]", expected, message))
        self.checked_messages = len(episode.messages)

    def check_turn(self, key: str, index: int, turn: Mapping[str, Any]) -> None:
        mismatch = _turn_mismatch(key, index, self.record["turns"][index], _plain(turn))
        if mismatch is not None:
            raise ReplayDiverged(mismatch)


def _turn_mismatch(
    key: str, index: int, recorded: Mapping[str, Any], replayed: Mapping[str, Any]
) -> ReplayMismatch | None:
    for name in TURN_FIELDS:
        if recorded.get(name) != replayed.get(name):
            return ReplayMismatch(key, index, name, recorded.get(name), replayed.get(name))
    return None


def compare_records(recorded: Mapping[str, Any], replayed: Mapping[str, Any]) -> ReplayMismatch | None:
    """The first difference between a record and the record of its replay: turn by turn
    (:data:`TURN_FIELDS`), then the number of turns, then :data:`ENDING_FIELDS` (a difference
    there is the last turn's); None when they agree."""
    key = str(recorded.get("key"))
    replayed = _plain(replayed)
    recorded_turns, replayed_turns = recorded["turns"], replayed["turns"]
    for index, (expected, got) in enumerate(zip(recorded_turns, replayed_turns, strict=False)):
        mismatch = _turn_mismatch(key, index, expected, got)
        if mismatch is not None:
            return mismatch
    if len(recorded_turns) != len(replayed_turns):
        turn = min(len(recorded_turns), len(replayed_turns))
        return ReplayMismatch(key, turn, "turns", len(recorded_turns), len(replayed_turns))
    last = len(recorded_turns) - 1 if recorded_turns else None
    for name in ENDING_FIELDS:
        if recorded.get(name) != replayed.get(name):
            return ReplayMismatch(key, last, name, recorded.get(name), replayed.get(name))
    return None


def spec_mismatch(record: Mapping[str, Any], spec: EpisodeSpec) -> ReplayMismatch | None:
    """The first difference between what ``record`` says it was played on and ``spec``, its
    :func:`replay_spec`: the dataset file's hash (the file as it is now), then the record's
    :data:`SPEC_FIELDS`; None when they agree."""
    key = str(record["key"])
    recorded_hash = record["replay"].get("dataset_sha256")
    current_hash = dataset_sha256(spec.dataset, spec.domain)
    if recorded_hash != current_hash:
        return ReplayMismatch(key, None, "dataset_sha256", recorded_hash, current_hash)
    stated = {**stack_fields(spec.stack), "seed": spec.seed, "trial": spec.trial}
    for name in SPEC_FIELDS:
        if record.get(name) != stated[name]:
            return ReplayMismatch(key, None, name, record.get(name), stated[name])
    return None


def replay_record(record: Mapping[str, Any]) -> ReplayMismatch | None:
    """Replay one record (module docstring); returns the first difference, or None when every
    observation, reward and the end are identical. Checks the dataset file's hash and the
    record's :data:`SPEC_FIELDS` first.
    ConfigError when the record cannot be replayed (:func:`replay_spec`)."""
    spec = replay_spec(record)
    key = str(record["key"])
    mismatch = spec_mismatch(record, spec)
    if mismatch is not None:
        return mismatch
    replayed_key = spec.key(str(record["policy"]))
    if _is_old_record(record):
        record = {**record, "key": replayed_key}  # its key is in the former format: today's names the stack
    elif replayed_key != key:
        return ReplayMismatch(key, None, "key", key, replayed_key)
    try:
        (replayed,) = run_episodes([spec], ReplayPolicy([record]), batch_size=1, name=str(record["policy"]))
        mismatch = compare_records(record, replayed)
    except ReplayDiverged as diverged:
        mismatch = diverged.mismatch
    return None if mismatch is None else replace(mismatch, key=key)


def replayed_turns(record: Mapping[str, Any], env: Any) -> Iterator[Any]:
    """Play ``record``'s turns again on ``env`` (a stack :meth:`EpisodeSpec.make_env` built from
    the record's :func:`replay_spec`; reset here with its seed and options) and yield the core env
    (``env.unwrapped``) after the reset and after each turn, once the opening messages, then the
    turn's reward and info (as the record keeps it: without :data:`INFO_DROPPED`), are the
    recorded ones; :class:`ReplayDiverged` at the first difference. Lighter than
    :func:`replay_record` (no record is built; a turn's ``context`` is not compared), for reading
    the env's state turn by turn. ConfigError as :func:`replay_spec`. The caller owns ``env``."""
    spec = replay_spec(record)
    key, recorded = str(record["key"]), record["messages"]
    observation, _ = env.reset(seed=spec.seed, options=spec.reset_options())
    opening = _plain(list(observation))
    if opening != recorded[: len(opening)]:
        index = next(i for i, m in enumerate(opening) if i >= len(recorded) or recorded[i] != m)
        raise ReplayDiverged(
            ReplayMismatch(
                key, None, f"messages[{index}]", recorded[index] if index < len(recorded) else None, opening[index]
            )
        )
    yield env.unwrapped
    for index, turn in enumerate(record["turns"]):
        _, reward, _, _, info = env.step(turn["action"])
        replayed = {"reward": float(reward), "info": _plain({k: v for k, v in info.items() if k not in INFO_DROPPED})}
        for name, value in replayed.items():
            if turn.get(name) != value:
                raise ReplayDiverged(ReplayMismatch(key, index, name, turn.get(name), value))
        yield env.unwrapped


def _plain(value: Any) -> Any:
    """``value`` as it reads back from a JSON record (tuples as lists, keys as strings)."""
    return json.loads(json.dumps(value))


def register(subparsers: Any) -> None:
    replay = subparsers.add_parser(
        "replay",
        help="re-run a run's recorded actions and check every observation and reward is identical",
        description="Replays every episode of RUN_DIR/episodes.jsonl (or the one --episode names): rebuilds "
        "its env from the record, sends the recorded actions and compares every observation, reward and the "
        "final score with the record (docs/replay.md). Exit 0: all identical; 6: a mismatch (the first "
        "differing turn of each episode is printed); 2: a record that cannot be replayed; 5: malformed lines "
        "(--skip-malformed leaves them out). A key's later duplicate records are left out with a note.",
    )
    replay.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="output directory of an eval or rollout run")
    replay.add_argument("--episode", metavar="KEY", default=None, help="replay only the episode with this key")
    replay.add_argument(
        "--skip-malformed", action="store_true", help="leave out malformed lines of episodes.jsonl instead of stopping"
    )
    replay.set_defaults(handler=run_replay)


def run_replay(args: argparse.Namespace) -> int:
    episodes = args.run_dir / EPISODES_FILE
    if not episodes.exists():
        raise ConfigError("run_dir", str(args.run_dir), f"holds no {EPISODES_FILE}")
    duplicates: list[int] = []
    records = list(read_records(episodes, skipped=[] if args.skip_malformed else None, duplicates=duplicates))
    if duplicates:
        print(f"note: {duplicates_note(episodes, duplicates)}", file=sys.stderr)
    if args.episode is not None:
        keys = [str(record.get("key")) for record in records]
        records = [record for record in records if record.get("key") == args.episode]
        if not records:
            raise ConfigError("episode", args.episode, f"not in {episodes}{did_you_mean(args.episode, keys)}")
    for spec_check in records:
        replay_spec(spec_check)  # every record replayable before any runs (exit 2 otherwise)
    versions = sorted({str(record["replay"].get("version")) for record in records} - {__version__})
    if versions:
        print(f"note: recorded with ace_gym {', '.join(versions)}, replaying with {__version__}", file=sys.stderr)
    mismatches = [mismatch for record in records if (mismatch := replay_record(record)) is not None]
    for mismatch in mismatches:
        print(mismatch.describe())
    print(f"replayed {len(records)} episodes: {len(records) - len(mismatches)} identical, {len(mismatches)} differ")
    return EXIT_REPLAY_MISMATCH if mismatches else EXIT_OK
