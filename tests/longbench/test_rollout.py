"""Evaluating chat engines on ALB-QA: records, accuracy tables, heatmaps, official rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ace_gym.eval import EpisodeSpec, run_episodes
from ace_gym.longbench.official import OfficialExporter, load_official
from ace_gym.longbench.question_types import QUESTION_TYPES
from ace_gym.longbench.report import format_alb_table, summarize_alb, write_alb_heatmaps
from ace_gym.longbench.rollout import qa_specs, run_official_rows, run_qa_episodes
from ace_gym.longbench.samples import SampleConfig, build_sample
from tests.longbench.answers import NonsenseEngine, OracleEngine

SPECS = [
    *qa_specs({"fmt": "concise"}, question_types=QUESTION_TYPES, buckets=[6000, 12000], samples=2),
    *qa_specs({"fmt": "verbose", "knowledge": "ki"}, question_types=QUESTION_TYPES, buckets=[40000], samples=1),
]


@pytest.fixture(scope="module")
def oracle_records() -> list[dict]:
    return list(run_qa_episodes(SPECS, OracleEngine(SPECS), batch_size=5))


def test_oracle__scores_1_everywhere_and_records_look_like_ace_records(oracle_records: list[dict]) -> None:
    assert [r["key"] for r in oracle_records] == [s.key("oracle") for s in SPECS]
    assert all(r["score"] == 1.0 == r["reward"] for r in oracle_records)
    (ace,) = run_episodes([EpisodeSpec.of("course", instance_index=0, max_turns=2)], _Silent(), batch_size=1)
    shared = {
        "key",
        "policy",
        "domain",
        "seed",
        "trial",
        "env_config",
        "score",
        "terminated",
        "truncated",
        "messages",
        "usage",
    }
    for record in oracle_records:
        assert shared <= set(record) and shared <= set(ace)
        assert set(record["usage"]) == set(ace["usage"])
        assert record["usage"]["prompt_tokens"] > 3 and record["usage"]["completion_tokens"] == 3
        assert {"question_type", "bucket", "tokens", "gt", "prediction", "acl_sum"} <= set(record)
        assert [m["role"] for m in record["messages"]] == ["system", "user", "assistant"] and record["context_omitted"]
        json.dumps(record)
    assert {r["domain"] for r in oracle_records} == {"kf-c", "ki-v"}
    assert {r["bucket"] for r in oracle_records} == {"6000", "12000", "40000"}


class _Silent:
    name = "silent"

    def generate(self, conversations, tools):
        from ace_gym.agents.base import Completion

        return [Completion("") for _ in conversations]


def test_summary__table_and_heatmaps_per_setting(oracle_records: list[dict], tmp_path: Path) -> None:
    summary = summarize_alb(oracle_records)
    assert summary["overall"]["score"] == 1.0 and summary["episodes"] == len(SPECS)
    concise = summary["settings"]["kf-c"]
    assert list(concise["per_bucket"]) == ["6000", "12000"]
    assert concise["cells"]["Intersection"]["12000"] == {
        "episodes": 2,
        "scored": 2,
        "unscored": 0,
        "score": 1.0,
        "tokens": pytest.approx(concise["cells"]["Intersection"]["12000"]["tokens"]),
    }
    table = format_alb_table(summary)
    assert "kf-c" in table and "ki-v" in table and "Weighted Summation(Env)" in table
    pytest.importorskip("matplotlib")
    paths = write_alb_heatmaps(summary, tmp_path)
    assert sorted(p.name for p in paths) == ["heatmap_kf-c.png", "heatmap_ki-v.png"]
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in paths)


def test_nonsense__scores_low() -> None:
    records = list(run_qa_episodes(SPECS, NonsenseEngine(), batch_size=7))
    summary = summarize_alb(records)
    assert summary["overall"]["score"] < 0.1
    assert all(r["prediction"] in (None, "banana", ["banana"]) for r in records)


def test_run_qa_episodes__keep_context_stores_the_whole_observation() -> None:
    spec = SPECS[0]
    (record,) = run_qa_episodes([spec], OracleEngine([spec]), keep_context=True)
    assert record["messages"][-1]["role"] == "assistant" and len(record["messages"]) > 10
    assert not record["context_omitted"]


def test_official_rows__are_answered_and_scored(tmp_path: Path, tokenizer) -> None:
    samples = [build_sample(SampleConfig(target_tokens=8000, answers="paper"), t, 0, tokenizer) for t in QUESTION_TYPES]
    with OfficialExporter(tmp_path) as exporter:
        for sample in samples:
            exporter.add(sample)
    rows = list(load_official(tmp_path))
    answers = {json.dumps(row.prompt()): row.answer for row in rows}

    class RowOracle:
        def generate(self, conversations, tools):
            from ace_gym.agents.base import Completion
            from ace_gym.longbench.scoring import answer_text

            return [Completion(answer_text(answers[json.dumps(c)])) for c in conversations]

    records = list(run_official_rows(rows, RowOracle(), batch_size=3, name="rows"))
    assert len(records) == 8 and all(r["score"] == 1.0 and r["env_id"] == "official" for r in records)
    assert summarize_alb(records)["settings"]["kf-c"]["per_bucket"]["8000"]["score"] == 1.0
