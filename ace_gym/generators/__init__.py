"""The procedural ACE generator: certified instances at any size, a pure function of a seed.

``generate_instance`` builds one instance, ``generate_dataset`` a file in the published layout,
``certify`` re-checks an instance's guarantees from its data alone::

    from ace_gym.generators import certify, generate_dataset, generate_instance

    instance = generate_instance("course", rows=5, cols=7, hidden_slots=21, decoy_budget=25, seed=7)
    assert certify(instance).holds
    generate_dataset("travel", hidden_slots=[1, 5, 21], decoy_budgets=[0, 10, 25], seed=42,
                     path="travel_5x7.json.gz", workers=2)   # byte-identical for any worker count

Impossible configurations raise ConfigError before any work; a configuration that stays
unsolved within the time budget raises GenerationError listing what was tried. On the command
line: ``ace-gym generate --help``.
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
