"""The one place env ids are minted: ``ACE-<domain>-v0`` for every domain."""

from __future__ import annotations

from gymnasium.envs.registration import WrapperSpec, register, registry

from ace_gym.domains import DOMAIN_NAMES
from ace_gym.presets import PROCEDURAL_PRESETS
from ace_gym.stacks import WRAPPERS

ENV_IDS: tuple[str, ...] = tuple(f"ACE-{domain}-v0" for domain in DOMAIN_NAMES)

PROCEDURAL_ENV_IDS: tuple[str, ...] = tuple(
    f"ACE-{domain}-{variant}-v0" for domain in DOMAIN_NAMES for variant in PROCEDURAL_PRESETS
)
"""``ACE-<domain>-<variant>-v0`` for every procedural variant of :data:`ace_gym.presets.PROCEDURAL_PRESETS`."""

SCENARIO_ENV_IDS: dict[str, dict[str, str]] = {
    "ACE-Scenario-v0": {},
    **{f"ACE-{domain}-scenario-v0": {"domain": domain} for domain in DOMAIN_NAMES},
}
"""AgencyBench-style staged scenarios (:class:`ace_gym.feedback.scenario.ScenarioEnv`) -> kwargs;
``ACE-Scenario-v0`` takes ``domain=`` (course by default)."""

ALB_ENTRY_POINTS: dict[str, str] = {
    "ALB-QA-v0": "ace_gym.longbench.qa_env:ALBQAEnv",
    "ALB-Puzzle-v0": "ace_gym.longbench.puzzle_env:ALBPuzzleEnv",
}
"""AgentLongBench envs (``ace_gym.longbench``, imported only when one is made)."""


PLANNING_ENTRY_POINTS: dict[str, str] = {
    "ACE-StepWise-v0": "ace_gym.planning.stepwise:StepWiseEnv",
    "ACE-Holistic-v0": "ace_gym.planning.holistic:HolisticEnv",
}
"""Planning probes (``ace_gym.planning``): one id each, the domain a keyword argument."""
SETTING_VARIANTS: dict[str, str] = {"unsolvable": "unsolvable", "distractors": "extraneous", "broken": "broken"}
"""Robustness variants: ``ACE-<domain>-<variant>-v0`` -> the entry of the wrapper registry
(:data:`ace_gym.stacks.WRAPPERS`, a planning setting) wrapped around ``ACE-<domain>-v0`` with its
default arguments."""
SETTING_ENV_IDS: tuple[str, ...] = tuple(
    f"ACE-{domain}-{variant}-v0" for domain in DOMAIN_NAMES for variant in SETTING_VARIANTS
)


def register_domain(domain: str) -> None:
    """Register ``ACE-<domain>-v0`` and ``ACE-<domain>-scenario-v0`` for ``domain`` (idempotent):
    the ids of a domain added to :data:`ace_gym.domains.DOMAINS` after ``import ace_gym``
    (docs/architecture.md, "a domain"), so that an episode spec or a stack can name it."""
    if f"ACE-{domain}-v0" not in registry:
        register(id=f"ACE-{domain}-v0", entry_point="ace_gym.envs.ace_env:AceEnv", kwargs={"domain": domain})
    if f"ACE-{domain}-scenario-v0" not in registry:
        register(
            id=f"ACE-{domain}-scenario-v0",
            entry_point="ace_gym.feedback.scenario:ScenarioEnv",
            kwargs={"domain": domain},
        )


def register_envs() -> None:
    """Register every ace-gym env id (idempotent)."""
    for domain in DOMAIN_NAMES:
        register_domain(domain)
    for domain in DOMAIN_NAMES:
        for variant, preset in PROCEDURAL_PRESETS.items():
            env_id = f"ACE-{domain}-{variant}-v0"
            if env_id not in registry:
                register(
                    id=env_id,
                    entry_point="ace_gym.envs.procedural:ProceduralAceEnv",
                    kwargs={"domain": domain, **preset},
                )
    for domain in DOMAIN_NAMES:
        for variant, name in SETTING_VARIANTS.items():
            env_id = f"ACE-{domain}-{variant}-v0"
            entry = WRAPPERS[name]
            wrapper = WrapperSpec(entry.class_name, entry.entry_point, dict(entry.defaults))
            if env_id not in registry:
                register(
                    id=env_id,
                    entry_point="ace_gym.envs.ace_env:AceEnv",
                    kwargs={"domain": domain},
                    additional_wrappers=(wrapper,),
                )
    for env_id, kwargs in SCENARIO_ENV_IDS.items():
        if env_id not in registry:
            register(id=env_id, entry_point="ace_gym.feedback.scenario:ScenarioEnv", kwargs=kwargs)
    for env_id, entry_point in {**PLANNING_ENTRY_POINTS, **ALB_ENTRY_POINTS}.items():
        if env_id not in registry:
            register(id=env_id, entry_point=entry_point)


def registered_env_ids() -> tuple[str, ...]:
    """Every id in Gymnasium's registry whose entry point is in ace_gym, sorted: the ids above and
    any variant another ace_gym module registers."""
    return tuple(sorted(i for i, spec in registry.items() if _module_of(spec.entry_point).startswith("ace_gym.")))


def _module_of(entry_point: object) -> str:
    """The module an entry point (an import string or a callable) comes from."""
    return entry_point if isinstance(entry_point, str) else str(getattr(entry_point, "__module__", ""))
