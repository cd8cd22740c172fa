"""AgencyBench's declaration (:class:`~ace_gym.benchmark.Benchmark`): the staged scenarios'
env ids, feedback rounds in the wrapper registry, and what its protocol adds to ``ace-gym eval``
(:mod:`ace_gym.feedback.evaluation`: flags, episode options, record fields, metrics and table)."""

from __future__ import annotations

from ace_gym.benchmark import Benchmark, EnvEntry
from ace_gym.wrapper_entry import WrapperEntry

BENCHMARK = Benchmark(
    "feedback",
    envs=(
        EnvEntry("ACE-{domain}-scenario-v0", "ace_gym.feedback.scenario:ScenarioEnv", plays_data=True),
        EnvEntry("ACE-Scenario-v0", "ace_gym.feedback.scenario:ScenarioEnv", plays_data=True),
    ),
    wrappers=(
        # outside the turn budget (it runs several budgeted attempts), inside a curriculum; its
        # per-episode fields are summarised from the records (ace_gym.feedback.metrics)
        WrapperEntry("feedback_rounds", "ace_gym.feedback.feedback_rounds:FeedbackRounds", 500, {}, "feedback_rounds"),
    ),
    eval_flags="ace_gym.feedback.evaluation:add_arguments",
    episode_options="ace_gym.feedback.evaluation:spec_settings",
    record_fields="ace_gym.feedback.evaluation:protocol_fields",
    summary="ace_gym.feedback.evaluation:add_metrics",
    table="ace_gym.feedback.evaluation:format_table",
)
"""AgencyBench on ACE: ``ACE-<domain>-scenario-v0`` and ``ACE-Scenario-v0`` (``domain=``, course by
default) play staged scenarios (:class:`~ace_gym.feedback.scenario.ScenarioEnv`);
``feedback_rounds`` wraps an episode in several attempts (:class:`~ace_gym.feedback.FeedbackRounds`)."""
