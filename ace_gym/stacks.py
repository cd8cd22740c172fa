"""The benchmarks, the one wrapper registry and the one description of an env stack.

:data:`BENCHMARKS` lists each benchmark home's declaration (:class:`~ace_gym.benchmark.Benchmark`):
registration, this registry, the policies by name and ``ace-gym eval`` iterate it, so that a
benchmark is added by its folder and one line here (docs/architecture.md, "a benchmark").

:data:`WRAPPERS` holds a :class:`~ace_gym.wrapper_entry.WrapperEntry` per wrapper: the core's,
declared here, and each benchmark's (its declaration's ``wrappers``). ``ace-gym eval --wrappers``
(the entries that are settings), the env server's allowed wrappers, the planning settings, the
registered setting variants and the episode specs of the rollout collector and the trainer
adapters all read it. Adding a wrapper is adding one entry (docs/architecture.md, "Adding a wrapper").

A :class:`StackSpec` is an env id, its keyword arguments and the wrappers around it, innermost
first, each with its keyword arguments: plain JSON values, like Gymnasium's ``EnvSpec`` with its
``additional_wrappers`` (``env.spec`` of a stack :meth:`StackSpec.make` builds names the same
stack, and ``gym.make(env.spec)`` rebuilds it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec, load_env_creator

from ace_gym.benchmark import Benchmark
from ace_gym.errors import ConfigError, did_you_mean
from ace_gym.lazy_exports import load_entry_point
from ace_gym.tools.readonly import read_only
from ace_gym.wrapper_entry import WrapperEntry

BENCHMARKS: tuple[Benchmark, ...] = tuple(
    load_entry_point(declaration)
    for declaration in (
        "ace_gym.feedback.benchmark:BENCHMARK",  # AgencyBench's protocol
        "ace_gym.longbench.benchmark:BENCHMARK",  # AgentLongBench
        "ace_gym.planning.benchmark:BENCHMARK",  # the Agent Planning Benchmark
    )
)
"""Every benchmark home's declaration, one line each; ``import ace_gym`` imports these
declarations (plain data) and nothing else of the homes."""

CORE_WRAPPERS: tuple[WrapperEntry, ...] = (
    WrapperEntry(
        "failure_injection",
        "ace_gym.wrappers.failure_injection:ToolFailureInjection",
        100,
        {"rate": 0.1},
        "injected_failures",
    ),
    WrapperEntry("chat_adapter", "ace_gym.wrappers.chat_adapter:ChatAdapter", 300, {}, "messages"),
    WrapperEntry("context_window", "ace_gym.wrappers.context_window:ContextWindow", 350, {"last_turns": 4}, "context"),
    WrapperEntry("step_budget", "ace_gym.wrappers.step_budget:StepBudget", 400, {"max_turns": 1000}, "turns_left"),
    WrapperEntry("curriculum", "ace_gym.wrappers.curriculum:Curriculum", 600, {}, "curriculum"),
)
"""The core wrappers' entries: failure injection next to the env (100), the chat adapter (300),
the context policy over it (350, opt-in: what the model is shown of a long conversation), the
turn budget around them (400), a curriculum outermost (600). Benchmark homes place theirs in
between: the planning settings 200-299 (they change the tool surface the adapter shows),
feedback rounds 500 (several budgeted attempts)."""

WRAPPERS: dict[str, WrapperEntry] = {
    entry.name: entry
    for entry in sorted(
        (*CORE_WRAPPERS, *(entry for benchmark in BENCHMARKS for entry in benchmark.wrappers)),
        key=lambda entry: entry.order,
    )
}
"""Every wrapper a stack may hold, by name, in stacking order (innermost first)."""

_BY_CLASS: dict[str, str] = {entry.class_name: entry.name for entry in WRAPPERS.values()}
"""Class name -> registry name: how ``env.spec`` and older server clients name a wrapper."""


def _check_registry(entries: Iterable[WrapperEntry]) -> None:
    """Names, class names and orders are each used once (a home declaring a clashing entry fails at import)."""
    seen: dict[object, str] = {}
    for entry in entries:
        for what in (("name", entry.name), ("class", entry.class_name), ("order", entry.order)):
            if what in seen:
                raise ConfigError(f"wrapper entry {entry.name}", what[1], f"{what[0]} already used by {seen[what]}")
            seen[what] = entry.name


_check_registry((*CORE_WRAPPERS, *(entry for benchmark in BENCHMARKS for entry in benchmark.wrappers)))


def wrapper_names(*, settings: bool = False) -> tuple[str, ...]:
    """The registry's names in stacking order; ``settings``: only the settings (what ``ace-gym
    eval --wrappers`` takes)."""
    return tuple(name for name, entry in WRAPPERS.items() if entry.setting or not settings)


def setting_names(names: Iterable[str], field: str = "wrappers") -> tuple[str, ...]:
    """``names``, settings of the registry, in stacking order (duplicates dropped); ConfigError
    naming ``field`` with a "did you mean" for a name that is no setting."""
    known = wrapper_names(settings=True)
    listed = [names] if isinstance(names, str) else list(names)
    for name in listed:
        if name not in known:
            raise ConfigError(field, name, f"known settings: {', '.join(known)}{did_you_mean(str(name), known)}")
    return tuple(name for name in known if name in listed)


def accepted_names() -> tuple[str, ...]:
    """Every name a stack may give a wrapper: the registry names, then the class names."""
    return (*WRAPPERS, *_BY_CLASS)


def wrapper_entry(name: str, field: str = "wrappers") -> WrapperEntry:
    """The entry of ``name`` (a registry name or a class name); ConfigError naming ``field``, with
    a "did you mean", for a name the registry does not hold."""
    if isinstance(name, str):
        found = WRAPPERS.get(name) or WRAPPERS.get(_BY_CLASS.get(name, ""))
        if found is not None:
            return found
    known = accepted_names()
    raise ConfigError(field, name, f"unknown wrapper; known: {', '.join(WRAPPERS)}{did_you_mean(str(name), known)}")


def wrap(env: gym.Env, wrappers: Sequence[tuple[str, Mapping[str, Any]]]) -> gym.Env:
    """``env`` wrapped in ``wrappers`` ((name, keyword arguments) pairs, innermost first), in
    the order given. A wrapper that refuses its arguments raises ConfigError naming it."""
    for index, (name, kwargs) in enumerate(wrappers):
        entry = wrapper_entry(name, f"wrappers[{index}].name")
        try:
            env = entry.wrapper(env, **kwargs)
        except TypeError as error:  # an unknown or missing keyword argument
            raise ConfigError(f"wrappers[{index}].kwargs", dict(kwargs), f"{entry.name}: {error}") from None
    return env


@dataclass(frozen=True)
class StackSpec:
    """An env stack: ``env_id`` (a registered id) made with ``env_kwargs`` (over the id's
    registered keyword arguments), wrapped in ``wrappers``, innermost first, each a registry name
    with its keyword arguments. Everything is plain JSON data, kept as JSON reads it back (a tuple
    becomes a list) and read-only, so a spec is a value: hashable by its :meth:`key`, and
    ``from_json(to_json())`` equal to it. A class name is read as its registry name. ConfigError
    naming the field for anything else (NaN and infinities included)."""

    env_id: str
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    wrappers: tuple[tuple[str, Mapping[str, Any]], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.env_id, str) or not self.env_id:
            raise ConfigError("env_id", self.env_id, "must be a registered env id")
        object.__setattr__(self, "env_kwargs", _json_object("env_kwargs", self.env_kwargs))
        layers = []
        for index, layer in enumerate(self.wrappers):
            name, kwargs = _layer(index, layer)
            entry = wrapper_entry(name, f"wrappers[{index}].name")
            layers.append((entry.name, _json_object(f"wrappers[{index}].kwargs", kwargs)))
        object.__setattr__(self, "wrappers", tuple(layers))

    @classmethod
    def of(
        cls,
        env_id: str,
        env_kwargs: Mapping[str, Any] | None = None,
        wrappers: Iterable[str | tuple[str, Mapping[str, Any]]] = (),
    ) -> StackSpec:
        """A stack with ``wrappers`` put in the registry's stacking order (a bare name takes its
        entry's default arguments)."""
        layers: list[tuple[str, Mapping[str, Any]]] = []
        for index, layer in enumerate(wrappers):
            if isinstance(layer, str):
                layers.append((layer, dict(wrapper_entry(layer, f"wrappers[{index}]").defaults)))
            else:
                layers.append(_layer(index, layer))
        spec = cls(env_id, env_kwargs or {}, tuple(layers))
        return cls(spec.env_id, spec.env_kwargs, tuple(sorted(spec.wrappers, key=lambda w: WRAPPERS[w[0]].order)))

    def below(self, name: str) -> StackSpec:
        """This stack without the wrappers that sit at or outside ``name``'s place in the
        stacking order (e.g. ``below("chat_adapter")``: the tool-call env under the adapter)."""
        order = wrapper_entry(name, "name").order
        return StackSpec(self.env_id, self.env_kwargs, tuple(w for w in self.wrappers if WRAPPERS[w[0]].order < order))

    def make(self) -> gym.Env:
        """The stack: the registered env's entry point called with its registered keyword
        arguments updated by ``env_kwargs`` (no env checker, no order enforcing), the id's
        registered wrappers, then :attr:`wrappers`. ``env.spec`` names the whole stack. An env or
        a wrapper that refuses its keyword arguments raises ConfigError naming them."""
        try:
            registered = gym.spec(self.env_id)
        except gym.error.Error:
            ids = [i for i, s in gym.registry.items() if str(getattr(s, "entry_point", "")).startswith("ace_gym.")]
            raise ConfigError(
                "env_id", self.env_id, f"not a registered env id{did_you_mean(self.env_id, ids)}"
            ) from None
        kwargs = {**registered.kwargs, **self.env_kwargs}
        entry_point = registered.entry_point
        if entry_point is None:
            raise ConfigError("env_id", self.env_id, "is registered without an entry point")
        try:
            env = _creator(entry_point)(**kwargs)
        except TypeError as error:  # an unknown or missing keyword argument
            raise ConfigError("env_kwargs", dict(self.env_kwargs), f"{self.env_id}: {error}") from None
        env.spec = EnvSpec(self.env_id, entry_point, kwargs=kwargs)
        for extra in registered.additional_wrappers:
            env = _creator(extra.entry_point)(env, **(extra.kwargs or {}))
        return wrap(env, self.wrappers)

    def to_dict(self) -> dict[str, Any]:
        """The stack as plain JSON values: ``{"env_id", "env_kwargs", "wrappers": [{"name", "kwargs"}]}``."""
        return {
            "env_id": self.env_id,
            "env_kwargs": dict(self.env_kwargs),
            "wrappers": [{"name": name, "kwargs": dict(kwargs)} for name, kwargs in self.wrappers],
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text, keys sorted (:meth:`from_json` reads it back)."""
        return json.dumps(self.to_dict(), sort_keys=True, allow_nan=False)

    @classmethod
    def from_dict(cls, data: Any) -> StackSpec:
        """The stack :meth:`to_dict` wrote; ConfigError naming the field for anything else."""
        if not isinstance(data, Mapping):
            raise ConfigError("stack", data, "must be a JSON object with env_id, env_kwargs and wrappers")
        unknown = set(data) - {"env_id", "env_kwargs", "wrappers"}
        if unknown:
            raise ConfigError("stack", sorted(unknown), "unknown fields (known: env_id, env_kwargs, wrappers)")
        wrappers = data.get("wrappers", [])
        if not isinstance(wrappers, list):
            raise ConfigError("wrappers", wrappers, "must be a list of {name, kwargs} objects")
        return cls(data.get("env_id", ""), data.get("env_kwargs", {}), tuple(wrappers))

    @classmethod
    def from_json(cls, text: str) -> StackSpec:
        """The stack :meth:`to_json` wrote; ConfigError for text that is no such stack."""
        try:
            data = json.loads(text)
        except ValueError as error:
            raise ConfigError("stack", text[:200], f"is not JSON ({error})") from None
        return cls.from_dict(data)

    def key(self) -> str:
        """The stack's identity: equal stacks have equal keys, whatever order their keyword
        arguments were given in."""
        return self.to_json()

    def __hash__(self) -> int:
        return hash(self.key())


def _creator(entry_point: Any) -> Callable[..., gym.Env]:
    """What an entry point (``"module:Name"`` or a callable) calls."""
    return cast(Callable[..., gym.Env], entry_point if callable(entry_point) else load_env_creator(entry_point))


def _layer(index: int, layer: Any) -> tuple[str, Mapping[str, Any]]:
    """A wrapper of a stack as (name, kwargs): a pair, or a ``{"name", "kwargs"}`` object."""
    if isinstance(layer, Mapping):
        unknown = set(layer) - {"name", "kwargs"}
        if unknown or "name" not in layer:
            raise ConfigError(f"wrappers[{index}]", dict(layer), "must be an object with name and kwargs")
        return layer["name"], layer.get("kwargs", {})
    if isinstance(layer, (tuple, list)) and len(layer) == 2:
        return layer[0], layer[1]
    raise ConfigError(f"wrappers[{index}]", layer, "must be a (name, kwargs) pair or a {name, kwargs} object")


def _json_object(field_name: str, value: Any) -> Mapping[str, Any]:
    """``value`` as it reads back from JSON (a tuple as a list), read-only at every depth
    (:func:`~ace_gym.tools.readonly.read_only`: still a dict, so JSON encoders take it);
    ConfigError naming ``field_name`` for anything but an object with string keys holding finite
    JSON values."""
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise ConfigError(field_name, value, "must be an object with string keys")
    try:
        text = json.dumps(dict(value), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as error:
        raise ConfigError(field_name, dict(value), f"must hold finite JSON values only ({error})") from None
    return cast(Mapping[str, Any], read_only(json.loads(text)))
