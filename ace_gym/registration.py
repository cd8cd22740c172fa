"""The one place env ids are minted: ``ACE-<domain>-v0`` and the procedural variants for every
domain, and the ids each benchmark declares (:data:`ace_gym.stacks.BENCHMARKS`)."""

from __future__ import annotations

from gymnasium.envs.registration import WrapperSpec, register, registry

from ace_gym.benchmark import EnvEntry
from ace_gym.domains import DOMAIN_NAMES
from ace_gym.presets import PROCEDURAL_PRESETS
from ace_gym.stacks import BENCHMARKS

ENV_IDS: tuple[str, ...] = tuple(f"ACE-{domain}-v0" for domain in DOMAIN_NAMES)

PROCEDURAL_ENV_IDS: tuple[str, ...] = tuple(
    f"ACE-{domain}-{variant}-v0" for domain in DOMAIN_NAMES for variant in PROCEDURAL_PRESETS
)
"""``ACE-<domain>-<variant>-v0`` for every procedural variant of :data:`ace_gym.presets.PROCEDURAL_PRESETS`."""

DATASET_ENV_IDS: tuple[str, ...] = (
    *ENV_IDS,
    *(
        env_id
        for benchmark in BENCHMARKS
        for entry in benchmark.envs
        if entry.plays_data
        for env_id in entry.ids(DOMAIN_NAMES)
    ),
)
"""The ids whose env plays a dataset (``dataset=``, the published data by default):
``ACE-<domain>-v0`` and the benchmarks' ids declared so (scenarios, robustness variants)."""


def _register(entry: EnvEntry, domains: tuple[str, ...]) -> None:
    """Register ``entry``'s ids for ``domains`` (idempotent)."""
    wrappers = tuple(WrapperSpec(w.class_name, w.entry_point, dict(w.defaults)) for w in entry.wrappers)
    for env_id, kwargs in entry.ids(domains).items():
        if env_id not in registry:
            register(id=env_id, entry_point=entry.entry_point, kwargs=kwargs, additional_wrappers=wrappers)


def register_domain(domain: str) -> None:
    """Register ``ACE-<domain>-v0`` and the benchmarks' per-domain ids (``ACE-<domain>-scenario-v0``
    ...) for ``domain`` (idempotent): the ids of a domain added to :data:`ace_gym.domains.DOMAINS`
    after ``import ace_gym`` (docs/architecture.md, "a domain"), so that an episode spec or a stack
    can name it."""
    if f"ACE-{domain}-v0" not in registry:
        register(id=f"ACE-{domain}-v0", entry_point="ace_gym.envs.ace_env:AceEnv", kwargs={"domain": domain})
    for benchmark in BENCHMARKS:
        for entry in benchmark.envs:
            if entry.per_domain:
                _register(entry, (domain,))


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
    for benchmark in BENCHMARKS:
        for entry in benchmark.envs:
            if not entry.per_domain:
                _register(entry, ())


def registered_env_ids() -> tuple[str, ...]:
    """Every id in Gymnasium's registry whose entry point is in ace_gym, sorted: the ids above and
    any variant another ace_gym module registers."""
    return tuple(sorted(i for i, spec in registry.items() if _module_of(spec.entry_point).startswith("ace_gym.")))


def _module_of(entry_point: object) -> str:
    """The module an entry point (an import string or a callable) comes from."""
    return entry_point if isinstance(entry_point, str) else str(getattr(entry_point, "__module__", ""))
