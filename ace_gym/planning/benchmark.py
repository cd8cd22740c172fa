"""The Agent Planning Benchmark's declaration (:class:`~ace_gym.benchmark.Benchmark`): its env ids
(the step-wise and holistic probes, the robustness variants), its settings in the wrapper registry
(:mod:`ace_gym.planning.settings`), its scripted probes and the settings' metrics and table in an
ACE summary."""

from __future__ import annotations

from ace_gym.benchmark import Benchmark, EnvEntry
from ace_gym.planning.settings import PLANNING_WRAPPERS, SETTINGS

BENCHMARK = Benchmark(
    "planning",
    envs=(
        EnvEntry(
            "ACE-{domain}-unsolvable-v0",
            "ace_gym.envs.ace_env:AceEnv",
            wrappers=(SETTINGS["unsolvable"],),
            plays_data=True,
        ),
        EnvEntry(
            "ACE-{domain}-distractors-v0",
            "ace_gym.envs.ace_env:AceEnv",
            wrappers=(SETTINGS["extraneous"],),
            plays_data=True,
        ),
        EnvEntry(
            "ACE-{domain}-broken-v0", "ace_gym.envs.ace_env:AceEnv", wrappers=(SETTINGS["broken"],), plays_data=True
        ),
        EnvEntry("ACE-StepWise-v0", "ace_gym.planning.stepwise:StepWiseEnv"),
        EnvEntry("ACE-Holistic-v0", "ace_gym.planning.holistic:HolisticEnv"),
    ),
    wrappers=PLANNING_WRAPPERS,
    policies=("ace_gym.planning.cost_solver:CostAwareSolver", "ace_gym.planning.probes:PROBES"),
    summary="ace_gym.planning.settings:add_metrics",
    table="ace_gym.planning.settings:format_table",
)
"""APB on ACE: ``ACE-StepWise-v0`` and ``ACE-Holistic-v0`` (one id each, the domain a keyword
argument); the robustness variants ``ACE-<domain>-unsolvable|distractors|broken-v0``
(``ACE-<domain>-v0`` inside that setting's wrapper, with its default arguments); the settings
``ace-gym eval --wrappers`` takes; the cost-aware solver and the probes (``ace-gym eval --policy``)."""
