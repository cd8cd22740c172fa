"""One declaration per benchmark home (ace_gym.benchmark, issue 41): every home declares one, the
centre lists each once, and what a declaration names reaches registration, the policies and
``ace-gym eval`` without a central edit."""

from __future__ import annotations

import argparse
import importlib
import re
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import ace_gym.eval.cli as eval_cli
import ace_gym.eval.records as records_module
import ace_gym.eval.rollout as rollout
import ace_gym.eval.summary as summary_module
import ace_gym.policies as policies
from ace_gym.benchmark import Benchmark, EnvEntry, Evaluation, Report
from ace_gym.domains import DOMAIN_NAMES
from ace_gym.errors import ConfigError
from ace_gym.policies import make_policy
from ace_gym.registration import ENV_IDS, PROCEDURAL_ENV_IDS, registered_env_ids
from ace_gym.stacks import BENCHMARKS, WRAPPERS
from tests.contracts.test_layers import INDEPENDENT

# -- every home declares one benchmark, listed once --------------------------------------------


def test_benchmarks__every_benchmark_home_of_the_layer_contract_declares_one_listed_once() -> None:
    (homes,) = INDEPENDENT  # the benchmark homes: the one layer of independent packages
    declared = {home: importlib.import_module(f"ace_gym.{home}.benchmark").BENCHMARK for home in homes}
    assert sorted(b.name for b in BENCHMARKS) == sorted(homes)
    assert all(declared[b.name] is b for b in BENCHMARKS)


def test_registration__registers_the_core_ids_and_each_declared_id_and_nothing_else() -> None:
    declared = [env_id for b in BENCHMARKS for entry in b.envs for env_id in entry.ids(DOMAIN_NAMES)]
    assert len(declared) == len(set(declared))
    assert set(registered_env_ids()) == {*ENV_IDS, *PROCEDURAL_ENV_IDS, *declared}
    for benchmark in BENCHMARKS:
        for entry in benchmark.envs:
            for env_id, kwargs in entry.ids(DOMAIN_NAMES).items():
                assert (gym.spec(env_id).entry_point, gym.spec(env_id).kwargs) == (entry.entry_point, kwargs)


def test_wrappers_and_policies__each_benchmark_entry_is_in_the_registry_and_the_table() -> None:
    for benchmark in BENCHMARKS:
        assert all(WRAPPERS[entry.name] is entry for entry in benchmark.wrappers)
        assert all(policies.SCRIPTED_POLICIES[p.name] is p for p in benchmark.scripted_policies())
    assert {"cost-solver", "probe-retry", "refuse"} <= set(policies.SCRIPTED_POLICIES)


# -- a declaration is checked -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"table": "ace_gym.planning.settings.format_table"}, "fourth.table"),
        ({"policies": ("ace_gym.planning.probes",)}, "fourth.policies[0]"),
        ({"evaluation": ""}, "fourth.evaluation"),
    ],
)
def test_benchmark__an_entry_point_that_is_not_module_attribute_is_a_config_error(
    fields: dict[str, Any], field: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        Benchmark("fourth", **fields)
    assert caught.value.field == field


def test_benchmark__a_name_that_is_no_package_name_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="package name"):
        Benchmark("fourth benchmark")


def test_env_entry__mints_one_id_per_domain_with_the_domain_argument_or_one_id() -> None:
    per_domain = EnvEntry("X-{domain}-v0", "m:Env", {"size": 3})
    assert per_domain.ids(["a", "b"]) == {"X-a-v0": {"size": 3, "domain": "a"}, "X-b-v0": {"size": 3, "domain": "b"}}
    assert EnvEntry("X-v0", "m:Env").ids(["a", "b"]) == {"X-v0": {}}
    with pytest.raises(ConfigError):
        EnvEntry("X-v0", "no entry point")


def test_policies__a_declared_policy_that_is_no_scripted_policy_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(policies, "BENCHMARKS", (Benchmark("fourth", policies=("ace_gym.stacks:StackSpec",)),))
    with pytest.raises(ConfigError) as caught:
        policies._declared_policies()
    assert caught.value.field == "fourth.policies"


# -- a fourth benchmark reaches eval through its declaration alone ------------------------------


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fourth-level", type=int, default=None)


def episode_options(args: argparse.Namespace) -> dict[str, Any]:
    return {} if args.fourth_level is None else {"fourth_level": args.fourth_level}


def record_fields(env: Any, info: dict[str, Any]) -> dict[str, Any]:
    return {"fourth_score": info.get("score")}


def add_metrics(summary: dict[str, Any], records: list[dict[str, Any]]) -> None:
    summary["fourth_episodes"] = len(records)


def format_table(summary: dict[str, Any]) -> str:
    return f"fourth: {summary['fourth_episodes']} episodes"


FOURTH_REPORT = Report(lambda records: {}, lambda summary: "", lambda summary, out, formats: None)


def evaluation(args: argparse.Namespace, label: str) -> Evaluation | None:
    if args.fourth_level is None:
        return None
    return Evaluation([1, 2], str, iter, {"policy": label}, lambda path: None, FOURTH_REPORT, lambda policy: 1)


def report(run: dict[str, Any] | None, first_record: dict[str, Any] | None) -> Report | None:
    return FOURTH_REPORT if run is not None and run.get("fourth") else None


FOURTH = Benchmark(
    "fourth",
    eval_flags="tests.test_benchmark:add_flags",
    episode_options="tests.test_benchmark:episode_options",
    record_fields="tests.test_benchmark:record_fields",
    summary="tests.test_benchmark:add_metrics",
    table="tests.test_benchmark:format_table",
    evaluation="tests.test_benchmark:evaluation",
    report="tests.test_benchmark:report",
)


def test_eval__a_fourth_benchmark_adds_flags_options_record_fields_summary_table_evaluation_and_report(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for module in (eval_cli, records_module, summary_module):
        monkeypatch.setattr(module, "BENCHMARKS", (*BENCHMARKS, FOURTH))
    parser = argparse.ArgumentParser()
    eval_cli.register(parser.add_subparsers())
    args = parser.parse_args(["eval", "--policy", "solver", "--out", str(tmp_path), "--fourth-level", "3"])
    assert eval_cli.episode_options(args)["fourth_level"] == 3
    assert eval_cli.run_identity(args, "solver")["settings"]["fourth_level"] == 3  # its options name the run
    assert eval_cli._evaluation(args, "solver").report is FOURTH_REPORT  # its own items
    plain = parser.parse_args(["eval", "--policy", "solver", "--out", str(tmp_path)])
    assert eval_cli._evaluation(plain, "solver").report is eval_cli.ACE_REPORT
    assert eval_cli._report_of(tmp_path, {"fourth": True}, False) is FOURTH_REPORT
    assert eval_cli._report_of(tmp_path, {"policy": "solver"}, False) is eval_cli.ACE_REPORT

    specs = eval_cli.dataset_specs("5x5", ["course"])
    records = list(rollout.run_episodes(specs[:2], make_policy("solver")))
    assert [r["fourth_score"] for r in records] == [r["score"] for r in records] == [1.0, 1.0]
    summary = summary_module.summarize(records)
    assert summary["fourth_episodes"] == 2
    assert re.search(r"\n\nfourth: 2 episodes$", summary_module.format_table(summary))
