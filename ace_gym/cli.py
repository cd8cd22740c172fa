"""The ``ace-gym`` command line. Each sub-command lives with the code it drives and exposes
``register(subparsers)``; this module only assembles them."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

COMMAND_MODULES: tuple[str, ...] = ("ace_gym.generators.cli", "ace_gym.eval.cli", "ace_gym.server.cli")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ace-gym", description="ACE grid-planning environments for LLM agents.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in COMMAND_MODULES:
        importlib.import_module(module).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one sub-command; returns the process exit code."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
