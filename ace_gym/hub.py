"""``ace-gym hub export DIR``: the benchmarks as a Hugging Face dataset folder (docs/datasets.md).

For each preset (:data:`PRESETS`: the bundled ``5x5`` published data and ``5x7``, and the
procedural presets of :mod:`ace_gym.presets`, generated with ``--seed``) and domain, one config
``<domain>_<preset>``: a folder ``DIR/<config>/`` holding ``<config>.parquet``, one row per
instance in the layout of :mod:`ace_gym.instance.parquet`, plus ``episode``, the
:class:`~ace_gym.eval.EpisodeSpec` as JSON that plays the instance (its ``dataset``: the bundled
name for a bundled preset, else the config's folder relative to ``DIR``: :func:`episode_spec`
resolves it). ``DIR/README.md`` is the dataset card: YAML front matter with the configs (so that
``datasets.load_dataset(DIR, "course_5x5")`` loads one, and ``load_dataset(DIR)`` the first),
what each holds, how to load it and build the env from it, and the MIT notice of the published
data. Every file is written atomically (:mod:`ace_gym.atomic`); pyarrow (the ``hub`` extra) writes
the parquet.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from ace_gym.atomic import write_atomic
from ace_gym.cli_flags import add_common_flags, output_directory, progress_bar, resolve_domains
from ace_gym.errors import ConfigError, did_you_mean
from ace_gym.eval.episode_spec import EpisodeSpec
from ace_gym.generators.dataset import generate_dataset
from ace_gym.instance import (
    BUNDLED_DATASETS,
    Dataset,
    bundled_dataset_path,
    load_dataset,
    parse_dataset,
)
from ace_gym.instance.parquet import PARQUET_SUFFIX, dataset_columns
from ace_gym.presets import PROCEDURAL_PRESETS

PRESETS: tuple[str, ...] = (*BUNDLED_DATASETS, *PROCEDURAL_PRESETS)
"""What ``--presets`` may name: a bundled dataset (exported as bundled) or a procedural preset (generated)."""
DEFAULT_PRESETS: tuple[str, ...] = BUNDLED_DATASETS
DEFAULT_SEED = 42
CARD = "README.md"
_DATA_LICENCE = "LICENSE-acebench-data.txt"


@dataclass(frozen=True)
class HubConfig:
    """One exported config: its ``name`` (``<domain>_<preset>``), the file written and what it holds."""

    name: str
    domain: str
    preset: str
    path: Path
    rows: int
    grid: str
    hidden_slots: tuple[int, ...]
    decoy_budgets: tuple[int, ...]
    origin: str


def config_name(domain: str, preset: str) -> str:
    """The config (and folder) name of ``domain``'s instances of ``preset``: ``course_5x5``."""
    return f"{domain}_{preset}"


def export_hub(
    out: str | os.PathLike[str],
    *,
    presets: Sequence[str] = DEFAULT_PRESETS,
    domains: Sequence[str] | None = None,
    seed: int = DEFAULT_SEED,
    hidden_slots: Sequence[int] | None = None,
    decoy_budgets: Sequence[int] | None = None,
    workers: int = 1,
    time_budget: float = 120.0,
    progress: Callable[[str, int, int], None] | None = None,
) -> list[HubConfig]:
    """Write every (preset, domain) config and the card into ``out``; returns the configs.

    A bundled preset is exported as bundled; a procedural preset is generated (its rows, cols and
    candidates per slot; ``hidden_slots`` and ``decoy_budgets`` replace its values when given,
    ``seed``, ``workers`` and ``time_budget`` as ``ace-gym generate`` takes them) and validated
    like a file. ``progress(config, done, total)`` reports generation. ConfigError for an unknown
    preset or domain; what the generator and the loader raise otherwise.
    """
    root = output_directory(Path(out))
    chosen = _presets(presets)
    domain_names = resolve_domains(["all"] if domains is None else list(domains))
    configs = []
    for preset in chosen:
        for domain in domain_names:
            name = config_name(domain, preset)
            dataset, origin = _dataset(
                preset, domain, seed, hidden_slots, decoy_budgets, workers, time_budget, name, progress
            )
            reference = preset if preset in BUNDLED_DATASETS else name
            path = root / name / f"{name}{PARQUET_SUFFIX}"
            _write_rows(path, dataset, reference)
            header = dataset.model
            configs.append(
                HubConfig(
                    name,
                    domain,
                    preset,
                    path,
                    len(dataset),
                    f"{header.rows}x{header.cols}",
                    tuple(header.hidden_slots),
                    tuple(header.branch_budget),
                    origin,
                )
            )
    write_atomic(root / CARD, lambda handle: handle.write(dataset_card(configs).encode("utf-8")))
    return configs


def episode_spec(text: str, root: str | os.PathLike[str]) -> EpisodeSpec:
    """The spec of an exported row's ``episode`` JSON ``text``, its ``dataset`` resolved against
    the export folder ``root`` (a bundled name stays as it is)."""
    spec = EpisodeSpec.from_json(text)
    if spec.dataset in BUNDLED_DATASETS or os.path.isabs(spec.dataset):
        return spec
    stack = replace(spec.stack, env_kwargs={**spec.stack.env_kwargs, "dataset": str(Path(root) / spec.dataset)})
    return replace(spec, stack=stack)


def _presets(names: Sequence[str]) -> list[str]:
    for name in names:
        if name not in PRESETS:
            raise ConfigError("presets", name, f"known: {', '.join(PRESETS)}{did_you_mean(name, PRESETS)}")
    return list(dict.fromkeys(names))


def _dataset(
    preset: str,
    domain: str,
    seed: int,
    hidden_slots: Sequence[int] | None,
    decoy_budgets: Sequence[int] | None,
    workers: int,
    time_budget: float,
    name: str,
    progress: Callable[[str, int, int], None] | None,
) -> tuple[Dataset, str]:
    """The validated dataset of ``preset`` for ``domain`` and where it comes from, in words."""
    if preset in BUNDLED_DATASETS:
        origin = (
            "the published ACE-Bench release" if preset == "5x5" else "ace-gym's generator, the paper's configuration"
        )
        return load_dataset(bundled_dataset_path(preset, domain)), f"bundled `{preset}` ({origin})"
    values: dict[str, Any] = PROCEDURAL_PRESETS[preset]
    generated = generate_dataset(
        domain,
        rows=values["rows"],
        cols=values["cols"],
        hidden_slots=list(hidden_slots or values["hidden_slots"]),
        decoy_budgets=list(decoy_budgets or values["decoy_budget"]),
        candidates_per_slot=values["candidates_per_slot"],
        seed=seed,
        workers=workers,
        time_budget=time_budget,
        progress=None if progress is None else (lambda done, total: progress(name, done, total)),
    )
    source = f"generated {name} (seed {seed})"
    return parse_dataset(
        json.dumps(generated, ensure_ascii=False), source
    ), f"generated: preset `{preset}`, seed {seed}"


def _write_rows(path: Path, dataset: Dataset, reference: str) -> None:
    """Write ``dataset``'s rows, with the episode that plays each, to the parquet file ``path``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    model = dataset.model
    texts = [instance.model_dump_json() for instance in model.instances]
    columns = dataset_columns(model.model_dump(exclude={"instances"}), texts)
    columns["episode"] = [
        EpisodeSpec.of(model.domain, reference, instance_id=instance_id).to_json()
        for instance_id in columns["instance_id"]
    ]
    table = pa.table(columns)
    write_atomic(path, lambda handle: pq.write_table(table, handle))


def dataset_card(configs: Sequence[HubConfig]) -> str:
    """The dataset card (``README.md``) of an export holding ``configs``."""
    lines = ["---", "license: mit", "pretty_name: ACE-Bench grid-planning tasks (ace-gym)"]
    lines += ["task_categories:", "- reinforcement-learning", "tags:", "- agents", "- tool-use", "- planning"]
    lines.append("configs:")
    for number, config in enumerate(configs):
        lines += [f"- config_name: {config.name}", "  data_files:", "  - split: train"]
        lines.append(f"    path: {config.name}/*{PARQUET_SUFFIX}")
        if number == 0:
            lines.append("  default: true")
    lines += ["---", "", "# ACE-Bench grid-planning tasks", ""]
    lines += [
        "Instances of the ACE-Bench grid-planning benchmark for tool-using LLM agents, exported by "
        "`ace-gym hub export`. One config per domain and size, one row per instance: `instance` holds "
        "the instance in the published JSON format, `dataset_header` the dataset file's other fields, "
        "`instance_index` its place in the file; `instance_id`, `domain`, `rows`, `cols`, `hidden_slots` "
        "(H) and `decoy_budget` (B) are there to filter by; `episode` is the ace-gym `EpisodeSpec` "
        "(JSON) that plays the instance.",
        "",
        "| config | grid | instances | H | B | source |",
        "|---|---|---|---|---|---|",
    ]
    for config in configs:
        hidden = " ".join(map(str, config.hidden_slots))
        budgets = " ".join(map(str, config.decoy_budgets))
        lines.append(f"| `{config.name}` | {config.grid} | {config.rows} | {hidden} | {budgets} | {config.origin} |")
    first = configs[0] if configs else None
    name = first.name if first else "course_5x5"
    env_id = f"ACE-{first.domain if first else 'course'}-v0"
    lines += [
        "",
        "## Load it",
        "",
        "```python",
        "from datasets import load_dataset",
        "",
        f'rows = load_dataset("path/to/this/folder", "{name}", split="train")',
        "```",
        "",
        "## Build the environment from it",
        "",
        "```python",
        "import gymnasium as gym",
        'import ace_gym  # registers the ACE-* ids (pip install ".[hub]")',
        "",
        f'env = gym.make("{env_id}", dataset=rows)  # or dataset="path/to/this/folder/{name}"',
        'observation, info = env.reset(options={"instance_id": rows[0]["instance_id"]})',
        "```",
        "",
        "The rows go through the validation a dataset file goes through, and the env plays them exactly "
        "as it plays the JSON files they came from. To play an exported episode:",
        "",
        "```python",
        "from ace_gym.hub import episode_spec",
        "",
        'env = episode_spec(rows[0]["episode"], "path/to/this/folder").make_env()',
        "```",
        "",
        "## Licence",
        "",
        "The `*_5x5` configs are the published ACE-Bench 5x5 datasets (uservan/AgentCE_Bench, commit "
        "37c9ed2), released under the MIT licence below. The other configs were generated by ace-gym "
        "(MIT licence, the ace-gym authors).",
        "",
        "```",
        _published_licence(),
        "```",
        "",
    ]
    return "\n".join(lines)


def _published_licence() -> str:
    """The MIT licence text of the published data, as the package ships it (without its scope line)."""
    text = (resources.files("ace_gym") / "data" / _DATA_LICENCE).read_text(encoding="utf-8")
    return text[text.index("MIT License") :].strip()


def register(subparsers: Any) -> None:
    hub = subparsers.add_parser(
        "hub",
        help="the benchmarks as Hugging Face datasets",
        description="Write the benchmarks as a Hugging Face dataset folder (docs/datasets.md): per preset "
        "and domain one parquet config, one row per instance with the episode spec that plays it, and a "
        "dataset card, so that datasets.load_dataset(DIR, 'course_5x5') loads one.",
    )
    commands = hub.add_subparsers(dest="hub_command", required=True, metavar="COMMAND")
    export = commands.add_parser(
        "export",
        help="write the benchmarks as parquet configs with a dataset card",
        description="Write one parquet config per domain and preset (instances and the episode spec playing "
        "each) and a dataset card into DIR, loadable with datasets.load_dataset(DIR, CONFIG) and "
        "gym.make('ACE-<domain>-v0', dataset=...). Needs pyarrow: pip install \".[hub]\".",
    )
    export.add_argument("dir", type=Path, metavar="DIR", help="folder to write into (created if missing)")
    export.add_argument(
        "--presets",
        nargs="+",
        default=list(DEFAULT_PRESETS),
        metavar="PRESET",
        help=f"bundled data or procedural presets to export (default: {' '.join(DEFAULT_PRESETS)}; known: "
        f"{', '.join(PRESETS)}; a procedural preset is generated, which takes minutes per domain at its full values)",
    )
    add_common_flags(
        export,
        defaults={"hidden_slots": None, "decoy_budgets": None, "seed": DEFAULT_SEED},
        helps={
            "hidden_slots": "hidden-slot counts of the generated presets (default: each preset's own)",
            "decoy_budgets": "decoy budgets of the generated presets (default: each preset's own)",
            "seed": f"generator seed of the generated presets (default {DEFAULT_SEED})",
        },
        out=False,
    )
    export.add_argument(
        "--workers", type=int, default=1, help="generator worker processes (output does not depend on it)"
    )
    export.add_argument("--time-budget", type=float, default=120.0, help="seconds allowed per generated instance")
    export.set_defaults(
        handler=run_export, resume_hint="; re-running writes the export again", write_hint="choose another DIR"
    )


def run_export(args: argparse.Namespace) -> int:
    bars: dict[str, Any] = {}

    def progress(name: str, done: int, total: int) -> None:
        bar = bars.get(name)
        if bar is None:
            bar = bars[name] = progress_bar(total, name, "instance", not args.no_progress)
        bar.update(done - bar.n)
        if done >= total:
            bar.close()

    configs = export_hub(
        args.dir,
        presets=args.presets,
        domains=args.domains,
        seed=args.seed,
        hidden_slots=args.hidden_slots,
        decoy_budgets=args.decoy_budgets,
        workers=args.workers,
        time_budget=args.time_budget,
        progress=progress,
    )
    for config in configs:
        print(config.path)
    print(args.dir / CARD)
    return 0
