"""The procedural ACE generator: certified instances at any size, a pure function of a seed.

``generate_instance`` builds one instance, ``generate_dataset`` a file in the published layout,
``certify`` re-checks an instance's guarantees from its data alone.
"""

from ace_gym.generators.certificate import Certificate, certify
from ace_gym.generators.config import GenerationError, InstanceConfig
from ace_gym.generators.dataset import dataset_file_name, generate_dataset, write_dataset
from ace_gym.generators.instances import generate_instance

__all__ = [
    "Certificate",
    "GenerationError",
    "InstanceConfig",
    "certify",
    "dataset_file_name",
    "generate_dataset",
    "generate_instance",
    "write_dataset",
]
