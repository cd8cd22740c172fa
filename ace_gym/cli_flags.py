"""What the ``ace-gym`` commands share: the flags spelled one way for every command
(:func:`add_common_flags`, :class:`ListAction`), what a ``--domains`` or ``--out`` value names,
and the progress bar. Imports only ``domains`` and ``errors`` of ace_gym, so that a command
(``eval``, ``generate``) imports it without importing the dispatcher (:mod:`ace_gym.cli`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ace_gym.domains import DOMAIN_NAMES
from ace_gym.errors import ConfigError, did_you_mean


class ListAction(argparse.Action):
    """A list flag: values after the flag, separated by spaces or commas (``1 5 7`` or ``1,5,7``),
    each converted by ``const`` (a callable raising ValueError for a bad item)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option: Any = None) -> None:
        items = [part.strip() for value in values for part in str(value).split(",") if part.strip()]
        try:
            setattr(namespace, self.dest, [self.const(item) for item in items])
        except ValueError as error:
            problem = f"expected {self.metavar} values, got {' '.join(values)!r} ({error})"
            raise argparse.ArgumentError(self, problem) from None


def _add(parser: argparse.ArgumentParser, flag: str, aliases: Iterable[str], **options: Any) -> None:
    """Add ``flag``, and its old spellings as hidden (deprecated) aliases of the same destination."""
    options.setdefault("dest", flag.lstrip("-").replace("-", "_"))
    parser.add_argument(flag, **options)
    for alias in aliases:
        hidden = {k: v for k, v in options.items() if k not in ("help", "default", "required")}
        parser.add_argument(alias, **hidden, help=argparse.SUPPRESS, default=argparse.SUPPRESS)


def add_common_flags(
    parser: argparse.ArgumentParser, defaults: Mapping[str, Any], helps: Mapping[str, str], *, out: bool = True
) -> None:
    """Add the flags ``eval``, ``generate`` and ``tokens`` share, spelled one way: ``--domains``,
    ``--hidden-slots``, ``--decoy-budgets`` (lists: space- or comma-separated), ``--seed``,
    ``--out`` (a directory; required when ``defaults`` has no ``out``; not added when ``out`` is
    False, for a command that writes no files) and ``--no-progress``.
    ``helps`` says what each means to the command. Old spellings (``--domain``, ``--hidden``,
    ``--budget``, ``--branch-budget``, ``--output-dir``, ``--quiet``) still work, unlisted."""
    _add(
        parser,
        "--domains",
        ["--domain"],
        nargs="+",
        action=ListAction,
        const=str,
        metavar="DOMAIN",
        default=["all"],
        help=f"'all' (default) or some of {', '.join(DOMAIN_NAMES)}",
    )
    for flag, aliases, name in (
        ("--hidden-slots", ["--hidden"], "hidden_slots"),
        ("--decoy-budgets", ["--budget", "--branch-budget"], "decoy_budgets"),
    ):
        _add(
            parser,
            flag,
            aliases,
            dest=name,
            nargs="+",
            action=ListAction,
            const=int,
            metavar="N",
            default=defaults.get(name),
            help=helps[name],
        )
    parser.add_argument("--seed", type=int, default=defaults["seed"], help=helps["seed"])
    if out:
        _add(
            parser,
            "--out",
            ["--output-dir"],
            dest="out",
            type=Path,
            metavar="DIR",
            required=defaults.get("out") is None,
            default=defaults.get("out"),
            help=helps["out"],
        )
    _add(parser, "--no-progress", ["--quiet"], dest="no_progress", action="store_true", help="no progress bar")


def resolve_domains(names: Sequence[str]) -> list[str]:
    """The domains a ``--domains`` value names (``all``: every domain); ConfigError for an unknown one."""
    if list(names) == ["all"]:
        return list(DOMAIN_NAMES)
    for name in names:
        if name not in DOMAIN_NAMES:
            raise ConfigError(
                "domains", name, f"known: all, {', '.join(DOMAIN_NAMES)}{did_you_mean(name, DOMAIN_NAMES)}"
            )
    return list(dict.fromkeys(names))


def output_directory(path: Path) -> Path:
    """``path`` when it is a directory or does not exist yet; ConfigError when it names a file."""
    if path.exists() and not path.is_dir():
        raise ConfigError("out", str(path), "exists and is not a directory; name a directory (created if missing)")
    return path


def progress_bar(total: int | None, description: str, unit: str, enabled: bool, initial: int = 0) -> tqdm:
    """A progress bar on stderr: redrawn in place on a terminal, a line every 10 s into a pipe or
    log file (and always at the end); nothing when not ``enabled``."""
    interactive = sys.stderr.isatty()
    return tqdm(
        total=total,
        initial=initial,
        desc=description,
        disable=not enabled,
        file=sys.stderr,
        mininterval=0.1 if interactive else 10.0,
        dynamic_ncols=interactive,
        ascii=not interactive,
        unit=unit,
    )
