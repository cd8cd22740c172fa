"""The ``ace-gym`` command line. Each sub-command lives with the code it drives and exposes
``register(subparsers)``; this module assembles them, defines the flags they share (one spelling
for every command: :func:`add_common_flags`), the progress bar, and the exit codes.

Exit codes (also in ``ace-gym --help``): 0 success; 1 ``ace-gym serve``'s server or one of its
worker processes failed while starting; 2 a bad argument, configuration or dataset, an output
directory that holds another run, or a ``--host``/``--port`` that ``ace-gym serve`` cannot
listen on; 3 the output directory or the port is in use by another process; 4 the
results could not be read or written (not a directory, no permission, disk full, a FIFO or device
where a file belongs); 5 the episode file holds malformed lines; 6 ``ace-gym replay`` found an
episode that did not replay identically (docs/replay.md); 7 the model could not be reached or
loaded (an endpoint refusing the connection or the key, a wrong URL or model name, a model path
that does not load: no episode is stored for it, and re-running the same command plays those
episodes); 130 interrupted (Ctrl-C). Each failure prints one line on stderr, with what can help
(re-running resumes; where a path cannot be written, it says what else to do); nothing already
written is lost. A server that fails while starting may log first (uvicorn's lines, a worker's);
the one line naming the cause comes last.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import logging
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ace_gym import __version__
from ace_gym.atomic import NotRegularFileError
from ace_gym.domains import DOMAIN_NAMES
from ace_gym.errors import (
    AceGymError,
    ConfigError,
    EngineUnavailableError,
    InUseError,
    ServerStartError,
    did_you_mean,
)
from ace_gym.runs.results import MalformedRecordsError

COMMAND_MODULES: tuple[str, ...] = (
    "ace_gym.generators.cli",
    "ace_gym.eval.cli",
    "ace_gym.eval.export",
    "ace_gym.eval.replay",
    "ace_gym.server.cli",
)
EXIT_OK = 0
EXIT_SERVER_START = 1
EXIT_CONFIG = 2
EXIT_IN_USE = 3
EXIT_IO = 4
EXIT_MALFORMED = 5
EXIT_REPLAY_MISMATCH = 6
EXIT_ENGINE = 7
EXIT_INTERRUPTED = 130
_ENGINE_HINT = "; no episode was stored for it: re-run the same command once the model is available"
EXIT_CODES_HELP = (
    "exit codes: 0 success; 1 (serve) the server or a worker failed while starting; 2 bad argument, "
    "configuration or dataset, an output directory holding another run, or (serve) a --host/--port "
    "it cannot listen on; 3 output directory or (serve) port in use by another process; 4 results "
    "could not be read or written (not a directory, no permission, disk full); 5 malformed lines in "
    "episodes.jsonl; 6 a replay differs from its record; 7 the model could not be reached or loaded "
    "(nothing stored for it: re-run to resume); 130 interrupted"
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ace-gym", description="ACE grid-planning environments for LLM agents.", epilog=EXIT_CODES_HELP
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        importlib.import_module(module).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one sub-command; returns the process exit code (see the module docstring)."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    prefix = f"ace-gym {args.command}:"
    hint = getattr(args, "resume_hint", "")
    try:
        return int(args.handler(args) or EXIT_OK)
    except InUseError as error:
        print(f"{prefix} {error}", file=sys.stderr)
        return EXIT_IN_USE
    except ServerStartError as error:  # after the server's own log lines: the last line names the cause
        print(f"{prefix} {error}", file=sys.stderr)
        return EXIT_SERVER_START
    except MalformedRecordsError as error:
        print(f"{prefix} {error}", file=sys.stderr)
        return EXIT_MALFORMED
    except EngineUnavailableError as error:  # from its fields: a Ray worker's error prints a traceback
        print(f"{prefix} {error.target}: {error.problem}{_ENGINE_HINT}", file=sys.stderr)
        return EXIT_ENGINE
    except AceGymError as error:
        print(f"{prefix} {error}", file=sys.stderr)
        return EXIT_CONFIG
    except OSError as error:
        where = f"{error.filename}: " if error.filename else ""
        print(f"{prefix} {where}{error.strerror or error}{_io_advice(error, args)}", file=sys.stderr)
        return EXIT_IO
    except KeyboardInterrupt:
        print(f"\n{prefix} interrupted{hint}", file=sys.stderr)
        return EXIT_INTERRUPTED


def _io_advice(error: OSError, args: argparse.Namespace) -> str:
    """What to do after ``error``: re-running the same command cannot help where a path is no
    regular file or cannot be written or read (a read-only file system, no permission), so the
    advice says what can (the command's ``write_hint``); otherwise the command's ``resume_hint``."""
    if isinstance(error, NotRegularFileError):
        return ""
    if error.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return f"; re-running will not help: {getattr(args, 'write_hint', 'check the permissions of that path')}"
    return str(getattr(args, "resume_hint", ""))


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


def add_common_flags(parser: argparse.ArgumentParser, defaults: Mapping[str, Any], helps: Mapping[str, str]) -> None:
    """Add the flags ``eval`` and ``generate`` share, spelled one way: ``--domains``,
    ``--hidden-slots``, ``--decoy-budgets`` (lists: space- or comma-separated), ``--seed``,
    ``--out`` (a directory; required when ``defaults`` has no ``out``) and ``--no-progress``.
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
    out_default = defaults.get("out")
    _add(
        parser,
        "--out",
        ["--output-dir"],
        dest="out",
        type=Path,
        metavar="DIR",
        required=out_default is None,
        default=out_default,
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


if __name__ == "__main__":
    sys.exit(main())
