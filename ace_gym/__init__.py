"""ace-gym: Gymnasium environments for tool-using LLM agents, built on ACE-Bench."""

from ace_gym.domains import DOMAIN_NAMES, DOMAINS, get_domain
from ace_gym.envs import AceEnv
from ace_gym.errors import AceGymError, ConfigError, DatasetError
from ace_gym.instance import Dataset, Instance, load_dataset
from ace_gym.registration import ENV_IDS, register_envs
from ace_gym.spaces import ToolCall

__version__ = "0.1.0"

register_envs()

__all__ = [
    "DOMAINS",
    "DOMAIN_NAMES",
    "ENV_IDS",
    "AceEnv",
    "AceGymError",
    "ConfigError",
    "Dataset",
    "DatasetError",
    "Instance",
    "ToolCall",
    "__version__",
    "get_domain",
    "load_dataset",
]
