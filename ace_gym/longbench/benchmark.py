"""AgentLongBench's declaration (:class:`~ace_gym.benchmark.Benchmark`): its two env ids and
what it adds to ``ace-gym eval`` (``--env ALB-QA-v0``: flags, an evaluation of its own questions
and its accuracy report; :mod:`ace_gym.longbench.eval_options`). Importing it imports no other
module of the package."""

from __future__ import annotations

from ace_gym.benchmark import Benchmark, EnvEntry

BENCHMARK = Benchmark(
    "longbench",
    envs=(
        EnvEntry("ALB-QA-v0", "ace_gym.longbench.qa_env:ALBQAEnv"),
        EnvEntry("ALB-Puzzle-v0", "ace_gym.longbench.puzzle_env:ALBPuzzleEnv"),
    ),
    eval_flags="ace_gym.longbench.eval_options:add_arguments",
    evaluation="ace_gym.longbench.eval_options:evaluation",
    report="ace_gym.longbench.eval_options:report",
)
"""AgentLongBench: ``ALB-QA-v0`` (questions about a generated history) and ``ALB-Puzzle-v0``
(the guessing game itself), imported only when one is made."""
