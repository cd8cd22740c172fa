"""ace-gym: Gymnasium environments for tool-using LLM agents, built on ACE-Bench.

``Instance`` (the dataset schema's pydantic model) is imported on first access, so that
``import ace_gym`` does not import pydantic.
"""

from typing import TYPE_CHECKING

from ace_gym.domains import DOMAIN_NAMES, DOMAINS, get_domain
from ace_gym.envs import AceEnv
from ace_gym.errors import AceGymError, ConfigError, DatasetError
from ace_gym.instance import Dataset, forget_loaded_datasets, load_dataset
from ace_gym.lazy_exports import lazy_exports
from ace_gym.registration import ENV_IDS, register_envs
from ace_gym.spaces import ToolCall
from ace_gym.version import __version__

if TYPE_CHECKING:
    from ace_gym.dataset_schema import Instance

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
    "forget_loaded_datasets",
    "get_domain",
    "load_dataset",
]

__getattr__, __dir__ = lazy_exports(__name__, "ace_gym.dataset_schema", ["Instance"])
