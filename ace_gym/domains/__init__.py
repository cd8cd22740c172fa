"""The registry of ACE domains: ``DOMAINS[name]`` and :func:`get_domain`."""

from __future__ import annotations

from ace_gym.domains import course, meal, pc_build, shopping, travel, workforce
from ace_gym.domains.spec import (
    Attribute,
    CategoricalAttribute,
    Domain,
    GlobalRule,
    NumericAttribute,
    SlotRule,
)
from ace_gym.errors import ConfigError, did_you_mean

DOMAINS: dict[str, Domain] = {
    module.DOMAIN.name: module.DOMAIN for module in (course, meal, pc_build, shopping, travel, workforce)
}
DOMAIN_NAMES: tuple[str, ...] = tuple(DOMAINS)


def get_domain(name: str) -> Domain:
    """Return the domain called ``name``; ConfigError with a suggestion if there is none."""
    try:
        return DOMAINS[name]
    except (KeyError, TypeError):
        raise ConfigError(
            "domain", name, f"unknown domain; known: {', '.join(DOMAINS)}{did_you_mean(name, DOMAINS)}"
        ) from None


__all__ = [
    "DOMAINS",
    "DOMAIN_NAMES",
    "Attribute",
    "CategoricalAttribute",
    "Domain",
    "GlobalRule",
    "NumericAttribute",
    "SlotRule",
    "get_domain",
]
