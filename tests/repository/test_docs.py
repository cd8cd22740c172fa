"""The README is a front page a newcomer can follow, and the docs hold nobody's machine.

README.md names every registered env id family and links every page of docs/ from its index; no
page prints an absolute path of a developer's machine or installs ace-gym from PyPI (it is
installed from a checkout: ``pip install ".[extra]"``); measurements live in docs/benchmarks.md,
each headed by the command that produced it and its date."""

from __future__ import annotations

import json
import re
from pathlib import Path

import gymnasium as gym
import pytest

import ace_gym  # noqa: F401  (registers the env ids)
from ace_gym.cli import main
from ace_gym.domains import DOMAIN_NAMES

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
# a path rooted in a machine's own folders; not a URL's path ("host/home/...") nor "~/.cache/..."
MACHINE_PATH = re.compile(r"(?<![\w.~/-])/(?:work|root|tmp|home|Users)/")
# `pip install "ace-gym[serve]"` and the like: the package is not on PyPI
PYPI_EXTRA = re.compile(r"ace-gym\[")


def _section(text: str, heading: str) -> str:
    """The body of the ``## heading`` section of a markdown text ('' without one)."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    return match.group(1) if match else ""


def machine_paths(text: str) -> list[str]:
    """The lines of ``text`` that print an absolute path of someone's machine."""
    return [line.strip() for line in text.splitlines() if MACHINE_PATH.search(line)]


def env_id_families() -> set[str]:
    """Every registered ace-gym id, with a domain name written ``<domain>``."""
    domains = "|".join(map(re.escape, DOMAIN_NAMES))
    return {
        re.sub(rf"^ACE-(?:{domains})-", "ACE-<domain>-", env_id)
        for env_id in gym.registry
        if env_id.startswith(("ACE-", "ALB-"))
    }


def test_machine_paths__finds_machine_folders_but_not_urls_or_the_home_cache() -> None:
    assert machine_paths("release at /work/refsrc vs ace-gym\nok\n| `/home/me/x` |") == [
        "release at /work/refsrc vs ace-gym",
        "| `/home/me/x` |",
    ]
    assert machine_paths("`~/.cache/ace-gym`, https://example.org/home/x, runs/tmp/x, a/root/b") == []


def test_readme_and_docs__print_no_absolute_path_of_a_machine() -> None:
    offenders = [f"{page.relative_to(ROOT)}: {line}" for page in PAGES for line in machine_paths(page.read_text())]
    assert not offenders, "\n".join(offenders)


CODE = sorted((ROOT / "ace_gym").rglob("*.py")) + sorted((ROOT / "examples").glob("*.py"))


def test_readme_docs_and_messages__install_extras_from_a_checkout_never_from_pypi() -> None:
    """The pages, and the install hints the library and examples print, name ``".[extra]"``."""
    offenders = [
        f"{page.relative_to(ROOT)}: {line.strip()}"
        for page in [*PAGES, *CODE]
        for line in page.read_text(encoding="utf-8").splitlines()
        if PYPI_EXTRA.search(line)
    ]
    assert not offenders, "\n".join(offenders)


def test_readme__docs_index_links_every_page_of_docs() -> None:
    index = _section(README.read_text(), "Documentation")
    linked = set(re.findall(r"\]\(docs/([\w.-]+\.md)\)", index))
    assert linked == {page.name for page in DOCS}


def test_readme__names_every_registered_env_id_family() -> None:
    text = README.read_text()
    families = env_id_families()
    assert {"ACE-<domain>-v0", "ALB-QA-v0", "ALB-Puzzle-v0"} <= families  # the registry is what it says
    assert sorted(family for family in families if f"`{family}`" not in text) == []
    assert [domain for domain in DOMAIN_NAMES if f"`{domain}`" not in text] == []


def test_readme__holds_no_measurement_tables() -> None:
    """Measurements go to docs/benchmarks.md: the README quotes no benchmark script's output."""
    assert not re.search(r"^\$ python benchmarks/", README.read_text(), flags=re.M)
    assert not re.search(r"this session", README.read_text(), flags=re.I)


def test_benchmarks_doc__every_table_comes_with_its_command_and_date() -> None:
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    assert not re.search(r"this session", text, flags=re.I)
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    outputs = 0
    for section in sections:
        for block in re.findall(r"```text\n(.*?)```", section, flags=re.S):
            outputs += 1
            command = block.splitlines()[0]
            assert command.startswith("$ "), f"a table without its command: {block[:80]!r}"
            script = re.match(r"\$ python (benchmarks/\S+\.py)", command)
            assert script is None or (ROOT / script.group(1)).is_file(), command
            assert re.search(r"Measured 20\d\d-\d\d-\d\d", section), f"no date for {command!r}"
    assert outputs >= 3  # the baselines, the release side by side, the collector


@pytest.mark.parametrize("policy", ["greedy", "solver"])
def test_benchmarks_doc__scripted_baselines_table_says_what_the_eval_measures(policy: str, tmp_path: Path) -> None:
    """The table's tool calls per episode (and greedy's score) are what the command above it gives."""
    section = _section((ROOT / "docs" / "benchmarks.md").read_text(), "Scripted baselines")
    row = next(line for line in section.splitlines() if line.startswith(f"| `{policy}` "))
    calls = float(row.split("|")[3])
    out = tmp_path / "run"
    assert main(["eval", "--policy", policy, "--dataset", "5x5", "--out", str(out), "--no-progress"]) == 0
    overall = json.loads((out / "summary.json").read_text())["overall"]
    assert overall["episodes"] == 210 and round(overall["tool_calls"], 1) == calls
    assert f"{overall['score']:.3f}" in row
