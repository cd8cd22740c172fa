"""The grid after each turn of an ACE episode, with its marks, for ``ace-gym view``.

A record keeps the final grid only; the grid after each turn is rebuilt by replaying the record
(:func:`~ace_gym.eval.replay.replayed_turns`: the recorded actions sent again through the env
stack its replay fields name, each turn checked against the record), so every tool, wrapper and
feedback round acts as it did. After each turn a filled hidden slot whose item is not among the
slot's valid items (:attr:`~ace_gym.instance.CompiledSlot.valid_items`: the candidates that pass
its slot rules, which the scorer, the rubric and the tools check) breaks a local rule, and after
the last turn each hidden slot is compared with the instance's truth.

Records may come from anywhere: a record the viewer cannot replay gets a note saying why, never
an error. Only the bundled datasets are loaded (a record naming a file path would make the
viewer read any file it names), and only when the file is the one the record was played on.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from ace_gym.envs import AceEnv
from ace_gym.errors import AceGymError
from ace_gym.eval.episode_spec import EpisodeSpec
from ace_gym.eval.replay import ReplayDiverged, replay_spec, replayed_turns, spec_mismatch
from ace_gym.instance import BUNDLED_DATASETS
from ace_gym.scoring import grid_of_ids

MAX_REASON_CHARS = 600
"""The longest reason a note quotes from an error (one naming a record quotes its key)."""
MAX_STACKS = 16
"""Env stacks kept for reuse at once (one per distinct stack of the run's records); the least
recently used is closed beyond it."""


class TurnGrids:
    """Rebuilds the grids of a run's episodes, reusing one env stack per distinct stack of the
    records (at most :data:`MAX_STACKS` open). Close it (or use it as a context manager)."""

    def __init__(self) -> None:
        self._stacks: OrderedDict[str, gym.Env] = OrderedDict()

    def __enter__(self) -> TurnGrids:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        while self._stacks:
            self._stacks.popitem()[1].close()

    def of(self, record: Mapping[str, Any]) -> dict[str, Any] | None:
        """The grids of ``record`` as the page embeds them, or None for a record with no grid (an
        ALB record). ``hidden``: the hidden slots ``[row, col]``; ``steps``: after the reset, then
        after each turn, ``{"grid": rows of ids (None = empty), "breaks": the hidden slots whose
        item breaks a slot rule}``, or None where the grid is as the step before left it;
        ``truth``: after the last turn, ``{"row,col": the truth's id}`` of every hidden slot;
        ``note``: why the grids stop early or are left out (then ``steps`` may be empty)."""
        if "grid" not in record and "hidden_slots" not in record:
            return None
        steps: list[dict[str, Any] | None] = []
        grids: dict[str, Any] = {"hidden": [], "steps": steps, "truth": None, "note": None}
        try:
            spec = replay_spec(record)
            if spec.dataset not in BUNDLED_DATASETS:
                grids["note"] = (
                    f"no grid after each turn: the dataset {spec.dataset!r} is not bundled "
                    "(the viewer reads no file a record names)"
                )
                return grids
            mismatch = spec_mismatch(record, spec)
            if mismatch is not None:
                grids["note"] = f"no grid after each turn: {mismatch.field} is not what the record was played on"
                return grids
            env = self._stack(spec)
            previous: list[int] | None = None
            core = None
            for core in replayed_turns(record, env):
                if not isinstance(core, AceEnv):
                    grids["note"] = "no grid after each turn: the record's env is no ACE env"
                    return grids
                grid = core.state.grid  # flat item indices, -1 = empty
                if grid == previous:
                    steps.append(None)
                    continue
                previous = list(grid)
                compiled = core.compiled
                breaks = [
                    [s.row, s.col] for s in compiled.slots if grid[s.cell] >= 0 and grid[s.cell] not in s.valid_items
                ]
                steps.append({"grid": grid_of_ids(compiled, grid), "breaks": breaks})
                if not grids["hidden"]:
                    grids["hidden"] = [[slot.row, slot.col] for slot in compiled.slots]
            if core is not None:
                compiled = core.compiled
                grids["truth"] = {
                    f"{slot.row},{slot.col}": compiled.item_ids[compiled.truth[slot.cell]] for slot in compiled.slots
                }
        except ReplayDiverged as diverged:
            where = "the opening" if diverged.mismatch.turn is None else f"turn {diverged.mismatch.turn + 1}"
            grids["note"] = (
                f"the grid after each turn stops before {where}: replayed, its {diverged.mismatch.field} "
                "differs from the record's"
            )
        except (AceGymError, gym.error.Error) as error:
            reason = str(error) if len(str(error)) <= MAX_REASON_CHARS else f"{str(error)[:MAX_REASON_CHARS]}…"
            grids["note"] = f"no grid after each turn: the record cannot be replayed ({reason})"
        return grids

    def _stack(self, spec: EpisodeSpec) -> gym.Env:
        key = spec.stack.key()
        env = self._stacks.pop(key, None)
        if env is None:
            env = spec.make_env()
            if len(self._stacks) >= MAX_STACKS:
                self._stacks.popitem(last=False)[1].close()
        self._stacks[key] = env
        return env
