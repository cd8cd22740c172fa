"""The dataset schema's models keep the names they were always imported by.

They live in :mod:`ace_gym.dataset_schema`, imported on first use so that ``import ace_gym`` does
not import pydantic; ``ace_gym.instance`` and ``ace_gym`` re-export them by a module
``__getattr__``.
"""

from __future__ import annotations

from types import ModuleType

import pytest

import ace_gym
from ace_gym import dataset_schema, instance

SCHEMA_NAMES = ("DatasetFile", "Instance", "InstanceMeta", "Position", "SlotEntry")


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_instance_module__re_exports_the_schema_model_itself(name: str) -> None:
    assert getattr(instance, name) is getattr(dataset_schema, name)
    assert name in dir(instance)


def test_package__re_exports_instance() -> None:
    from ace_gym import Instance

    assert Instance is dataset_schema.Instance is ace_gym.Instance
    assert "Instance" in dir(ace_gym)


@pytest.mark.parametrize("module", [instance, ace_gym], ids=["ace_gym.instance", "ace_gym"])
def test_lazy_re_export__an_unknown_name_is_an_attribute_error(module: ModuleType) -> None:
    with pytest.raises(AttributeError, match="no attribute 'Instanse'"):
        _ = module.Instanse
