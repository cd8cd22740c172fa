"""Failure recovery: how an agent copes with the tool failures :class:`~ace_gym.wrappers.ToolFailureInjection`
injects (docs/replay.md, "Failure-recovery metrics"). The one home of these definitions; records,
the evaluation summary and the trainer metrics all read them from here.

* A failure is *recovered* when a later call of the same tool with equivalent arguments reaches
  the env and succeeds (the wrapper marks it: ``info["recovers"]``).
* Its *turns to recover* is the number of assistant turns from the failed call's turn to the
  recovering call's turn (1: retried on the very next turn; 0: retried within the same turn).
* The *recovery rate* of a set of episodes is recovered failures / injected failures (None when
  nothing was injected); *turns to recover* is the mean over the recovered failures (None when
  none was recovered).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

COUNT_KEYS = ("injected_failures", "recovered_failures", "recovery_turns")
"""An episode's recovery counts (:func:`recovery_counts`): failures injected, failures recovered
and the turns it took to recover them, summed."""


def failure_log(turns: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every injected failure of an episode, from its per-turn log (``turns`` of a record): ``id``
    (the wrapper's ``failure_id``), ``turn`` (index into ``turns``), ``tool``, ``mode``,
    ``recovered`` and ``turns_to_recover`` (None while not recovered), in injection order."""
    failures: dict[int, dict[str, Any]] = {}
    for index, turn in enumerate(turns):
        for call in turn.get("info", {}).get("calls", ()):
            if "failure_id" in call and call.get("failure_injected"):  # "in" first: most calls have neither key
                failures[int(call["failure_id"])] = {
                    "id": int(call["failure_id"]),
                    "turn": index,
                    "tool": call.get("tool"),
                    "mode": call.get("failure_mode"),
                    "recovered": False,
                    "turns_to_recover": None,
                }
            for failure_id in call["recovers"] if "recovers" in call else ():
                failure = failures.get(int(failure_id))
                if failure is not None:
                    failure.update(recovered=True, turns_to_recover=index - failure["turn"])
    return list(failures.values())


def recovery_counts(failures: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """:data:`COUNT_KEYS` of one episode's :func:`failure_log`."""
    failures = list(failures)
    recovered = [f for f in failures if f["recovered"]]
    return {
        "injected_failures": len(failures),
        "recovered_failures": len(recovered),
        "recovery_turns": sum(int(f["turns_to_recover"]) for f in recovered),
    }


def recovery_metrics(episodes: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The recovery metrics of episodes' counts (:data:`COUNT_KEYS`; an episode without
    ``recovery_turns`` counts toward the rate only): ``failures``, ``recovered``,
    ``recovery_rate`` and ``turns_to_recover`` (module docstring; None where undefined)."""
    injected = recovered = timed = turns = 0
    for counts in episodes:
        injected += int(counts.get("injected_failures", 0))
        recovered += int(counts.get("recovered_failures", 0))
        if "recovery_turns" in counts:
            timed += int(counts.get("recovered_failures", 0))
            turns += int(counts["recovery_turns"])
    return {
        "failures": injected,
        "recovered": recovered,
        "recovery_rate": recovered / injected if injected else None,
        "turns_to_recover": turns / timed if timed else None,
    }
