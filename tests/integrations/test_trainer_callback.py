"""AceEvalCallback inside a real (tiny, CPU) Trainer run, and the metrics it logs."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from ace_gym.agents.llm.tiny_model import build_tiny_model  # noqa: E402
from ace_gym.errors import ConfigError  # noqa: E402
from ace_gym.eval.records import stack_fields  # noqa: E402
from ace_gym.integrations.trainer_callback import (  # noqa: E402
    EVAL_FAILED_METRIC,
    AceEvalCallback,
    ace_metrics,
    parse_error_turn,
    pass_at_k,
    summary_metrics,
    validation_specs,
)


def _turn(calls: int = 0, parse_errors: tuple[str, ...] = (), skipped: int = 0) -> dict:
    return {"info": {"calls": [{}] * calls, "parse_errors": list(parse_errors), "skipped_calls": skipped}}


def test_parse_error_turn__counts_turns_the_adapter_had_to_correct() -> None:
    assert parse_error_turn(_turn())  # no call at all
    assert parse_error_turn(_turn(parse_errors=("truncated JSON",)))  # a broken call
    assert parse_error_turn(_turn(calls=1, parse_errors=("stray fragment",)))
    assert not parse_error_turn(_turn(calls=2))
    assert not parse_error_turn(_turn(calls=1, skipped=1))


def _record(domain: str, score: float, turns: list[dict], instance: str = "i0", seed: int = 0) -> dict:
    return {"dataset": "5x5", "domain": domain, "instance_id": instance, "seed": seed, "score": score, "turns": turns}


def test_ace_metrics__means_per_domain_turns_parse_errors_and_groups() -> None:
    records = [  # two GRPO groups of two: course i0 (one solved), meal i0 (none solved)
        _record("course", 1, [_turn(calls=1), _turn(calls=1)]),
        _record("course", 0, [_turn()]),
        _record("meal", 0, [_turn(parse_errors=("x",)), _turn(calls=1), _turn()]),
        _record("meal", 0, [_turn(calls=1), _turn(calls=1)]),
    ]
    assert ace_metrics(records) == {
        "ace/score": pytest.approx(1 / 4),
        "ace/turns": pytest.approx(2.0),
        "ace/parse_error_rate": pytest.approx(3 / 8),
        "ace/pass@2": pytest.approx(0.5),
        "ace/avg@2": pytest.approx(0.25),
        "ace/episodes": 4.0,
        "ace/score/course": 0.5,
        "ace/score/meal": 0.0,
    }
    assert ace_metrics([]) == {}


def test_ace_metrics__recovery_rate_and_turns_to_recover_pooled_and_per_failure_rate() -> None:
    def turn(**call: object) -> dict:
        return {"info": {"calls": [call], "parse_errors": [], "skipped_calls": 0}}

    def failed(failure_id: int) -> dict:
        return turn(failure_injected=True, failure_id=failure_id, failure_mode="timeout", tool="get_slot_id")

    records = [  # rate 0.5: two failures recovered by one call, after 2 and 1 turns; rate 0.1: none recovered
        {**_record("course", 0, [failed(1), failed(2), turn(recovers=[1, 2])]), "tool_failure_rate": 0.5},
        {**_record("course", 0, [failed(1), turn()], instance="i1"), "tool_failure_rate": 0.1},
        {**_record("course", 1, [turn()], instance="i2"), "tool_failure_rate": 0.0},
    ]
    metrics = ace_metrics(records)
    assert metrics["ace/recovery_rate"] == pytest.approx(2 / 3) and metrics["ace/turns_to_recover"] == 1.5
    assert (metrics["ace/recovery_rate/fail=0.5"], metrics["ace/turns_to_recover/fail=0.5"]) == (1.0, 1.5)
    assert metrics["ace/recovery_rate/fail=0.1"] == 0.0 and "ace/turns_to_recover/fail=0.1" not in metrics
    assert not any(key.startswith("ace/recovery_rate") for key in ace_metrics(records[2:]))


def test_validation_specs__play_every_instance_at_every_failure_rate() -> None:
    specs = validation_specs(["course"], 2, tool_failure_rates=(0.0, 0.25))
    assert [stack_fields(spec.stack)["tool_failure_rate"] for spec in specs] == [0.0, 0.25, 0.0, 0.25]
    assert len({spec.instance_index for spec in specs}) == 2
    with pytest.raises(ConfigError):
        validation_specs(["course"], 1, tool_failure_rates=(1.5,))


def test_pass_at_k__is_the_unbiased_estimate_over_a_group() -> None:
    assert pass_at_k([1, 0, 0, 0], 1) == pytest.approx(0.25)
    assert pass_at_k([1, 0, 0, 0], 2) == pytest.approx(1 - 3 / 6)
    assert pass_at_k([1, 1, 0], 2) == 1.0 and pass_at_k([0, 0], 2) == 0.0
    summaries = [
        {"domain": "meal", "group": g, "score": s, "turns": 1, "parse_error_turns": 0}
        for g, s in (("a", 1), ("a", 0), ("a", 0), ("b", 0), ("b", 0))
    ]
    metrics = summary_metrics(summaries)
    assert metrics["ace/pass@2"] == pytest.approx((pass_at_k([1, 0, 0], 2) + 0.0) / 2)


def test_validation_specs__are_a_fixed_seeded_slice_of_distinct_instances() -> None:
    specs = validation_specs(("course", "travel"), 5, seed=3, max_turns=7)
    assert specs == validation_specs(("course", "travel"), 5, seed=3, max_turns=7)
    assert specs != validation_specs(("course", "travel"), 5, seed=4, max_turns=7)
    for domain in ("course", "travel"):
        indices = [s.instance_index for s in specs if s.domain == domain]
        assert len(set(indices)) == 5
    assert {stack_fields(s.stack)["max_turns"] for s in specs} == {7}


def test_validation_specs__rejects_unknown_domains_and_empty_slices() -> None:
    with pytest.raises(ConfigError):
        validation_specs(("cours",), 2)
    with pytest.raises(ConfigError):
        validation_specs(("course",), 0)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny"))


class _Texts(torch.utils.data.Dataset):
    """A few tokenised sentences for causal-LM training."""

    def __init__(self, tokenizer: object) -> None:
        texts = ["set the slot", "check the global constraints", "query candidates", "call done"] * 2
        self.items = [tokenizer(t, return_tensors="pt")["input_ids"][0] for t in texts]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.items[i], "labels": self.items[i]}


def test_ace_eval_callback__logs_validation_metrics_from_the_live_model_during_training(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_model)
    before = model.lm_head.weight.detach().clone()
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=4,
        per_device_train_batch_size=1,
        learning_rate=1e-2,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
    )
    trainer = transformers.Trainer(model=model, args=args, train_dataset=_Texts(tokenizer), processing_class=tokenizer)
    callback = AceEvalCallback(
        trainer,
        every_steps=2,
        domains=("course", "meal"),
        episodes_per_domain=1,
        max_turns=1,
        engine_options={"max_new_tokens": 6},
    )
    trainer.add_callback(callback)

    def no_reload(*args: object, **kwargs: object) -> None:
        raise AssertionError("the callback must use the live model, not reload it")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", no_reload)
    trainer.train()

    logged = [entry for entry in trainer.state.log_history if "ace/score" in entry]
    assert [entry["step"] for entry in logged] == [2, 4] == [step for step, _ in callback.metrics_history]
    assert [entry["step"] for entry in trainer.state.log_history if "loss" in entry] == [1, 2, 3, 4]
    for entry in logged:
        assert entry["ace/score"] == entry["ace/score/course"] == entry["ace/score/meal"] == 0.0
        assert entry["ace/turns"] == 1.0 and entry["ace/episodes"] == 2.0
        assert 0.0 <= entry["ace/parse_error_rate"] <= 1.0
    assert not torch.equal(before, model.lm_head.weight)  # the model did train between evaluations


def test_ace_eval_callback__an_evaluation_that_cannot_load_its_model_logs_the_failure_never_a_score(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class Trainer:  # what the callback uses of a Trainer
        processing_class = str(tmp_path / "no-tokenizer")  # a tokenizer path that does not load
        model = object()

        def __init__(self) -> None:
            self.logged: list[dict[str, Any]] = []

        def log(self, logs: dict[str, Any]) -> None:
            self.logged.append(logs)

    trainer = Trainer()
    callback = AceEvalCallback(trainer, every_steps=1, domains=("course",), episodes_per_domain=1, max_turns=1)
    control = SimpleNamespace(should_log=False)
    with caplog.at_level(logging.WARNING, logger="ace_gym.integrations.trainer_callback"):
        callback.on_step_end(SimpleNamespace(), SimpleNamespace(global_step=1), control)
    assert trainer.logged == [{EVAL_FAILED_METRIC: 1.0}]  # no ace/score of any value
    assert callback.metrics_history == [] and [step for step, _ in callback.failures] == [1]
    assert "no-tokenizer: cannot load" in callback.failures[0][1] and "no-tokenizer: cannot load" in caplog.text
    assert control.should_log is False  # the step's own training log is left as it was
