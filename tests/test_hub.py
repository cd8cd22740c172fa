"""``ace-gym hub export``: the export loads with ``datasets.load_dataset``, and envs built from it
replay the published release's traces byte for byte."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest

from ace_gym.cli import main
from ace_gym.envs.sources import DatasetSource
from ace_gym.eval.episode_spec import EpisodeSpec
from ace_gym.exit_codes import EXIT_CONFIG
from ace_gym.hub import episode_spec
from ace_gym.instance import resolve_dataset
from tests.conftest import load_traces, replay_trace, trace_env

datasets = pytest.importorskip("datasets")
pytest.importorskip("pyarrow")

pytestmark = pytest.mark.slow  # the module exports the six 5x5 configs once: about 10 s of CPU in all

TRACES = load_traces()
GENERATED = "course_procedural-10x10"


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hub")
    assert main(["hub", "export", str(folder), "--presets", "5x5", "--no-progress"]) == 0
    generated = ["--presets", "procedural-10x10", "--domains", "course", "--hidden-slots", "20", "--decoy-budgets", "0"]
    assert main(["hub", "export", str(folder / "generated"), *generated, "--no-progress"]) == 0
    return folder


def _rows(export: Path, config: str | None = None) -> datasets.Dataset:
    cache = export.parent / f"{export.name}-cache"
    return datasets.load_dataset(str(export), config, split="train", cache_dir=str(cache))


def test_export__loads_with_load_dataset_per_config_and_by_default(export: Path) -> None:
    course = _rows(export, "course_5x5")
    assert len(course) == 35 and course[0]["instance_id"] == "course_r5_c5_h1_b0"
    assert _rows(export)["instance_id"] == course["instance_id"]  # the first config is the default
    assert set(_rows(export, "workforce_5x5")["domain"]) == {"workforce"}


def test_card__names_every_config_and_the_published_data_licence(export: Path) -> None:
    card = (export / "README.md").read_text()
    front = card.split("---")[1]
    assert [line.split(": ")[1] for line in front.splitlines() if "config_name" in line] == [
        f"{domain}_5x5" for domain in ("course", "meal", "pc_build", "shopping", "travel", "workforce")
    ]
    assert "MIT License" in card and "Copyright (c) 2026 xuanyu" in card and "uservan/AgentCE_Bench" in card
    assert 'gym.make("ACE-course-v0", dataset=rows)' in card


@pytest.mark.parametrize("trace", TRACES, ids=[f"{t['variant']}-{t['instance_id']}" for t in TRACES])
def test_envs_from_the_export__replay_the_parity_traces_byte_for_byte(trace: dict, export: Path) -> None:
    domain = trace["domain"]
    replay_trace(trace_env(trace, export / f"{domain}_5x5"), trace)  # the config's folder
    rows = _rows(export, f"{domain}_5x5")  # the datasets.Dataset, validated once per domain here
    replay_trace(trace_env(trace, source=DatasetSource(_validated(domain, rows))), trace)


_VALIDATED: dict[str, object] = {}


def _validated(domain: str, rows: datasets.Dataset) -> object:
    if domain not in _VALIDATED:
        _VALIDATED[domain] = resolve_dataset(rows, domain)
    return _VALIDATED[domain]


def test_gym_make__takes_the_loaded_dataset_and_plays_the_json_sources_episode(export: Path) -> None:
    trace = next(t for t in TRACES if t["domain"] == "meal")
    config = trace["task_config"]
    kwargs = {key: config[key] for key in ("extra_query_num", "global_check_alpha", "max_query_ids")}
    env = gym.make("ACE-meal-v0", dataset=_rows(export, "meal_5x5"), **kwargs)
    replay_trace(env.unwrapped, trace)


def test_episode_specs__round_trip_and_play_their_rows_instance(export: Path) -> None:
    for config, root in (("shopping_5x5", export), (GENERATED, export / "generated")):
        rows = _rows(root, config)
        for row in rows:
            assert EpisodeSpec.from_json(row["episode"]).to_json() == row["episode"]
        spec = episode_spec(rows[-1]["episode"], root)
        env = spec.stack.below("chat_adapter").make()
        _, info = env.reset(seed=spec.seed, options=spec.reset_options())
        assert info["instance_id"] == rows[-1]["instance_id"]
        assert env.unwrapped.dataset.model == resolve_dataset(rows, spec.domain).model


def test_export__an_unknown_preset_is_a_config_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hub", "export", str(tmp_path), "--presets", "5x6"]) == EXIT_CONFIG
    assert "presets='5x6'" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
