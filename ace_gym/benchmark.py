"""One benchmark home's declaration: what it adds to the core and to ``ace-gym eval``.

Each benchmark home (``planning``, ``feedback``, ``longbench``) exports one :class:`Benchmark`,
``BENCHMARK`` in its ``benchmark`` module, and :data:`ace_gym.stacks.BENCHMARKS` lists them: the
env ids (:mod:`ace_gym.registration`), the wrapper registry (:mod:`ace_gym.stacks`), the scripted
policies (:mod:`ace_gym.policies`), the ``eval`` flags, episode options, record fields, summary
metrics and tables (:mod:`ace_gym.eval`) all iterate that list, so that adding a benchmark is its
folder, its line in the list and its name in the layer contract (docs/architecture.md, "a benchmark").

A declaration is plain data: everything it names in its home is an entry point
(``"module:attribute"``), imported on first use, so that ``import ace_gym`` (which registers the
env ids and builds the wrapper registry) loads none of a home's envs, wrappers or metrics. This
module imports nothing of ace_gym's but the foundation layer, so every home may declare one.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ace_gym.errors import ConfigError
from ace_gym.lazy_exports import check_entry_point, load_entry_point
from ace_gym.wrapper_entry import WrapperEntry


@dataclass(frozen=True)
class EnvEntry:
    """An env id a benchmark registers.

    ``env_id``: the id; with ``{domain}`` in it, one id per domain, made with ``domain=`` added to
    ``kwargs``. ``entry_point``: ``"module:Class"`` (imported when the env is made); ``kwargs``:
    its registered keyword arguments (plain values); ``wrappers``: wrapper-registry entries the id
    puts around the env, with their default arguments; ``plays_data``: the env plays a dataset
    (``dataset=``, the published data by default).
    """

    env_id: str
    entry_point: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    wrappers: tuple[WrapperEntry, ...] = ()
    plays_data: bool = False

    def __post_init__(self) -> None:
        check_entry_point("entry_point", self.entry_point)

    @property
    def per_domain(self) -> bool:
        """Whether the entry mints one id per domain (``{domain}`` in :attr:`env_id`)."""
        return "{domain}" in self.env_id

    def ids(self, domains: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Env id -> registered keyword arguments: one id per domain of ``domains`` for a
        per-domain entry, else the one id."""
        if not self.per_domain:
            return {self.env_id: dict(self.kwargs)}
        return {self.env_id.format(domain=domain): {**self.kwargs, "domain": domain} for domain in domains}


@dataclass(frozen=True)
class Report:
    """How a kind of run is summarised: ``summarize(records) -> summary``, the printed
    ``format_table(summary)`` and ``write_heatmaps(summary, folder, formats)``."""

    summarize: Callable[[Iterable[dict[str, Any]]], dict[str, Any]]
    format_table: Callable[[dict[str, Any]], str]
    write_heatmaps: Callable[[dict[str, Any], Path, Sequence[str]], object]


@dataclass(frozen=True)
class Evaluation:
    """What one ``eval`` command runs: every selected item (an ACE episode spec, a benchmark's own
    item), the key of an item, the rollout that plays items (``rollout(items, policy,
    batch_size=, name=)``), the run identity, the check of a directory without one, the report
    and the default batch size of a policy spec."""

    items: list[Any]
    key: Callable[[Any], str]
    rollout: Callable[..., Iterator[dict[str, Any]]]
    run: dict[str, Any]
    refuse_mixing: Callable[[Path], None]
    report: Report
    default_batch_size: Callable[[str], int]


@dataclass(frozen=True)
class Benchmark:
    """One benchmark home's declaration.

    ``name``: the home's package name. ``envs``: the env ids it registers. ``wrappers``: its
    entries of the wrapper registry. ``policies``: entry points of its scripted policies, each
    naming a :class:`~ace_gym.agents.base.ScriptedPolicy` class or a tuple of them.

    What it adds to ``ace-gym eval``, each an entry point of a function, or None:

    * ``eval_flags(parser)``: adds its flags to the ``eval`` parser;
    * ``episode_options(args) -> dict``: the ACE episode-spec fields its flags ask for (their
      values that are not None join the run identity's settings);
    * ``record_fields(env, info) -> dict``: fields a finished ACE episode's record gets;
    * ``summary(summary, records)``: adds its metrics to an ACE summary, in place;
    * ``table(summary) -> str | None``: its table under the ACE table;
    * ``evaluation(args, label) -> Evaluation | None``: an evaluation of its own items, when its
      flags ask for one (else the ACE evaluation runs);
    * ``report(run, first_record) -> Report | None``: its report, when a run folder's identity
      (else, for a folder without one, its first record) is one of its own runs.
    """

    name: str
    envs: tuple[EnvEntry, ...] = ()
    wrappers: tuple[WrapperEntry, ...] = ()
    policies: tuple[str, ...] = ()
    eval_flags: str | None = None
    episode_options: str | None = None
    record_fields: str | None = None
    summary: str | None = None
    table: str | None = None
    evaluation: str | None = None
    report: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ConfigError("name", self.name, "must be the benchmark home's package name")
        for index, entry_point in enumerate(self.policies):
            check_entry_point(f"{self.name}.policies[{index}]", entry_point)
        for hook in ("eval_flags", "episode_options", "record_fields", "summary", "table", "evaluation", "report"):
            entry_point = getattr(self, hook)
            if entry_point is not None:
                check_entry_point(f"{self.name}.{hook}", entry_point)

    def scripted_policies(self) -> tuple[type, ...]:
        """The scripted policy classes :attr:`policies` names, in order."""
        found: list[type] = []
        for entry_point in self.policies:
            loaded = load_entry_point(entry_point)
            found.extend(loaded if isinstance(loaded, tuple) else (loaded,))
        return tuple(found)

    def add_eval_flags(self, parser: argparse.ArgumentParser) -> None:
        """Add the benchmark's ``eval`` flags to ``parser`` (none when it declares none)."""
        if self.eval_flags is not None:
            load_entry_point(self.eval_flags)(parser)

    def episode_options_of(self, args: argparse.Namespace) -> dict[str, Any]:
        """The ACE episode-spec fields the ``eval`` flags ``args`` ask of this benchmark."""
        return {} if self.episode_options is None else dict(load_entry_point(self.episode_options)(args))

    def record_fields_of(self, env: Any, info: Mapping[str, Any]) -> dict[str, Any]:
        """The record fields of a finished ACE episode (its env, when at hand, and last info)."""
        return {} if self.record_fields is None else dict(load_entry_point(self.record_fields)(env, info))

    def add_metrics(self, summary: dict[str, Any], records: Sequence[Mapping[str, Any]]) -> None:
        """Add the benchmark's metrics over ``records`` to the ACE ``summary``, in place."""
        if self.summary is not None:
            load_entry_point(self.summary)(summary, records)

    def format_table(self, summary: Mapping[str, Any]) -> str | None:
        """The benchmark's table of an ACE ``summary``, or None when it has none to show."""
        return None if self.table is None else load_entry_point(self.table)(summary)

    def evaluation_of(self, args: argparse.Namespace, label: str) -> Evaluation | None:
        """The evaluation of the benchmark's own items that ``args`` ask for, or None."""
        return None if self.evaluation is None else load_entry_point(self.evaluation)(args, label)

    def report_of(self, run: Mapping[str, Any] | None, first_record: Mapping[str, Any] | None) -> Report | None:
        """The benchmark's report when ``run`` (a run identity; else ``first_record``) is its own, or None."""
        return None if self.report is None else load_entry_point(self.report)(run, first_record)
