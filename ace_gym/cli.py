"""The ``ace-gym`` command line: a dispatcher. Each sub-command lives with the code it drives and
exposes ``register(subparsers)``; this module assembles them, runs the one asked for and turns
what it raises into an exit code (:mod:`ace_gym.exit_codes`; also in ``ace-gym --help``). The flags
the commands share, and the progress bar, are in :mod:`ace_gym.cli_flags`. No module of ace_gym
imports this one; only ``python -m ace_gym`` and the ``ace-gym`` script run it.

Each failure prints one line on stderr, with what can help (re-running resumes; where a path
cannot be written, it says what else to do); nothing already written is lost. A server that fails
while starting may log first (uvicorn's lines, a worker's); the one line naming the cause comes
last.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import logging
import sys
from collections.abc import Sequence

from ace_gym import __version__
from ace_gym.atomic import NotRegularFileError
from ace_gym.errors import AceGymError, EngineUnavailableError, InUseError, ServerStartError
from ace_gym.exit_codes import (
    EXIT_CODES_HELP,
    EXIT_CONFIG,
    EXIT_ENGINE,
    EXIT_IN_USE,
    EXIT_INTERRUPTED,
    EXIT_IO,
    EXIT_MALFORMED,
    EXIT_OK,
    EXIT_SERVER_START,
)
from ace_gym.runs.results import MalformedRecordsError

__all__ = ["COMMAND_MODULES", "build_parser", "main"]

COMMAND_MODULES: tuple[str, ...] = (
    "ace_gym.generators.cli",
    "ace_gym.eval.cli",
    "ace_gym.eval.export",
    "ace_gym.eval.replay",
    "ace_gym.eval.view",
    "ace_gym.eval.tokens",
    "ace_gym.server.cli",
    "ace_gym.hub",
)
_ENGINE_HINT = "; no episode was stored for it: re-run the same command once the model is available"


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


if __name__ == "__main__":
    sys.exit(main())
