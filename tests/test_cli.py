"""The ``ace-gym`` command line as a whole: one flag vocabulary, help for every flag, ``--version``."""

from __future__ import annotations

import argparse

import pytest

import ace_gym
from ace_gym.cli import build_parser, main
from ace_gym.exit_codes import EXIT_CODES_HELP

SHARED_FLAGS = ("--domains", "--hidden-slots", "--decoy-budgets", "--seed", "--out", "--no-progress")


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(subparsers.choices)


def test_version__prints_the_package_version(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"ace-gym {ace_gym.__version__}"


@pytest.mark.parametrize("command", ["", "eval", "report", "generate"])
def test_help__every_listed_flag_says_what_it_does(command: str) -> None:
    parser = _subcommands()[command] if command else build_parser()
    listed = [a for a in parser._actions if a.help != argparse.SUPPRESS and a.option_strings]
    assert listed
    undocumented = [a.option_strings for a in listed if not (a.help or "").strip()]
    assert undocumented == []


def _all_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """``parser`` and every sub-command parser below it."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found += _all_parsers(child)
    return found


def test_help__every_command_speaks_plain_text_not_sphinx_markup() -> None:
    parsers = _all_parsers(build_parser())
    assert {p.prog for p in parsers} >= {"ace-gym", "ace-gym hub", "ace-gym hub export", "ace-gym eval"}
    for parser in parsers:
        text = parser.format_help()
        for markup in ("``", ":data:", ":mod:", ":class:", ":func:", ":meth:", ":attr:", ":exc:"):
            assert markup not in text, f"{parser.prog} --help shows {markup}"


def test_help__lists_the_exit_codes(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert " ".join(EXIT_CODES_HELP.split()) in " ".join(capsys.readouterr().out.split())


def test_eval_and_generate__share_one_flag_vocabulary() -> None:
    commands = _subcommands()
    for name in ("eval", "generate"):
        flags = {s for a in commands[name]._actions if a.help != argparse.SUPPRESS for s in a.option_strings}
        assert set(SHARED_FLAGS) <= flags, name


@pytest.mark.parametrize(
    "argv",
    [
        ["--domains", "course", "meal", "--hidden-slots", "1", "5", "--decoy-budgets", "0", "4"],
        ["--domains", "course,meal", "--hidden-slots", "1,5", "--decoy-budgets", "0,4"],
        ["--domain", "course", "meal", "--hidden", "1,5", "--budget", "0", "4"],  # old spellings, unlisted
    ],
)
@pytest.mark.parametrize("command", ["eval", "generate"])
def test_list_flags__take_spaces_or_commas_and_old_spellings(command: str, argv: list[str]) -> None:
    required = ["--policy", "solver", "--out", "x"] if command == "eval" else []
    args = build_parser().parse_args([command, *required, *argv])
    assert (args.domains, args.hidden_slots, args.decoy_budgets) == (["course", "meal"], [1, 5], [0, 4])


def test_generate__old_output_dir_and_quiet_spellings_still_work() -> None:
    args = build_parser().parse_args(["generate", "--output-dir", "data", "--quiet", "--branch-budget", "3"])
    assert (str(args.out), args.no_progress, args.decoy_budgets) == ("data", True, [3])


def test_list_flags__reject_a_non_number_with_a_usage_error(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["eval", "--policy", "solver", "--out", "x", "--hidden-slots", "1,five"])
    assert exited.value.code == 2 and "--hidden-slots: expected N values" in capsys.readouterr().err


def test_cli__keeps_the_moved_exit_codes_and_flag_helpers_importable_for_one_release() -> None:
    import ace_gym.cli
    import ace_gym.cli_flags
    import ace_gym.exit_codes

    moved = {
        **{name: ace_gym.exit_codes for name in dir(ace_gym.exit_codes) if name.startswith("EXIT_")},
        **{
            name: ace_gym.cli_flags
            for name in ("ListAction", "add_common_flags", "output_directory", "progress_bar", "resolve_domains")
        },
    }
    assert len(moved) == 15
    assert {name: getattr(ace_gym.cli, name) for name in moved} == {
        name: getattr(home, name) for name, home in moved.items()
    }
