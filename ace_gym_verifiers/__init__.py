"""The verifiers plugin of ace-gym: ``vf-eval ace-gym-verifiers`` (taskset id ``ace-gym-verifiers``).

verifiers imports this package for the id and takes the Taskset, Env and Harness subclasses it
exports in ``__all__``; they live in :mod:`ace_gym.integrations.verifiers`.
"""

from ace_gym.integrations.verifiers import (
    AceChatHarness,
    AceChatHarnessConfig,
    AceEnvConfig,
    AceTask,
    AceTaskData,
    AceTaskset,
    AceTasksetConfig,
    AceVerifiersEnv,
)

__all__ = [
    "AceChatHarness",
    "AceChatHarnessConfig",
    "AceEnvConfig",
    "AceTask",
    "AceTaskData",
    "AceTaskset",
    "AceTasksetConfig",
    "AceVerifiersEnv",
]
