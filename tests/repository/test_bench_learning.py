"""benchmarks/bench_learning.py --quick: both tracks' pipelines end to end (from scratch:
pretraining, the short-context warm-up and SFT on solver traces; pretrained: a GGUF model the
test writes, loaded by the library's GGUF code; then GRPO or its shuffled-reward control through
the env, held-out evaluation greedy and sampled, results.json and learning.png, resuming, and
combining runs); its recovering teacher (SlippingSolver)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("datasets")
pytest.importorskip("matplotlib")

from tests.benchmark_scripts import load_benchmark
from tests.tiny_gguf import write_tiny_gguf

bench_learning = load_benchmark("bench_learning")


@pytest.mark.slow  # 12 s on an idle 2-core machine, 23 s beside another CPU job (TRL's GRPO step is most)
def test_quick_run__sft_loss_falls_grpo_plays_the_env_and_every_stage_is_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    assert bench_learning.main(["--quick", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))

    for phase in ("pretrain", "warmup", "sft"):
        losses = results[f"{phase}_loss"]
        assert len(losses) == bench_learning.QUICK["scratch"][f"{phase}_steps"] and losses[-1] < losses[0]

    assert results["settings"]["track"] == "scratch" and results["settings"]["control"] == "none"
    assert {"data", "model", "pretraining", "warm-up", "sft", "evaluation", "grpo"} <= set(results["seconds"])
    stages = results["stages"]
    assert [s["stage"] for s in stages] == [
        "before SFT",
        "after pretraining",
        "after warm-up",
        "after SFT",
        "GRPO step 1",
    ]
    held_out = stages[0]["episodes"]
    assert held_out > 0
    for measured in [*stages, *(s["sampled"] for s in stages), *results["baselines"].values()]:
        assert measured["episodes"] == held_out  # every row on the same held-out instances
        for name in bench_learning.METRICS:
            assert isinstance(measured[name], float) and measured[name] >= 0.0
    assert set(results["baselines"]) == {"greedy", "random", "solver-batch"}
    assert results["baselines"]["solver-batch"]["success_rate"] == 1.0  # the held-out instances are solvable
    assert results["baselines"]["random"]["invalid_call_rate"] > 0.0  # the rate counts the env's refusals

    (step,) = [entry for entry in results["grpo_log"] if "ace/train/episodes" in entry]
    assert (
        step["ace/train/episodes"]
        == bench_learning.QUICK["scratch"]["group_size"] * bench_learning.QUICK["scratch"]["prompts_per_step"]
    )
    assert step["ace/train/turns"] >= 1 and step["num_tokens"] > 0  # the GRPO batch was played through the env

    # --freeze-embeddings (the default): warm-up and SFT left the embeddings as built (GRPO: below),
    # and the output layer, tied to them (the default)
    start = bench_learning.load_model(tmp_path / "model_init", bench_learning.parse_args([]))
    sft = bench_learning.load_model(tmp_path / "model_sft", bench_learning.parse_args([]))
    assert (start.get_input_embeddings().weight == sft.get_input_embeddings().weight).all()
    assert sft.get_output_embeddings().weight is sft.get_input_embeddings().weight and sft.config.tie_word_embeddings
    assert not sft.get_output_embeddings().weight.requires_grad
    # --train-output-layer: an output layer of its own, a trainable copy of the frozen embeddings
    untied = bench_learning.load_model(tmp_path / "model_init", bench_learning.parse_args(["--train-output-layer"]))
    output, embeddings_weight = untied.get_output_embeddings().weight, untied.get_input_embeddings().weight
    assert output is not embeddings_weight and (output == embeddings_weight).all() and output.requires_grad
    assert not embeddings_weight.requires_grad and not untied.config.tie_word_embeddings
    assert not (start.model.layers[0].mlp.up_proj.weight == sft.model.layers[0].mlp.up_proj.weight).all()
    model = results["model"]
    embeddings = start.get_input_embeddings().weight.numel()
    assert model["parameters"] == sum(p.numel() for p in start.parameters())
    assert model["trained_parameters"] == model["parameters"] - embeddings

    png = (tmp_path / "learning.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")

    # GRPO again from the saved SFT model, rewarded by the partial score, on instances SFT never saw.
    # The quick model solves nothing, so every group would be all-zero and the step a no-op: the
    # reward here alternates 0 and 1 within each group, so the step moves the weights.
    def ace_partial(ace_episode: list, **_: object) -> list[float]:
        return [float(k % 2) for k in range(len(ace_episode))]

    played: list = []

    def train_grpo(model: object, tokenizer: object, specs: list, *rest: object) -> list:
        played.extend(specs)
        return real_train_grpo(model, tokenizer, specs, *rest)

    real_train_grpo = bench_learning.train_grpo
    monkeypatch.setattr("ace_gym.integrations.rewards.partial_reward", ace_partial)
    monkeypatch.setattr(bench_learning, "train_grpo", train_grpo)
    again = tmp_path / "from_sft"
    argv = ["--quick", "--out", str(again), "--from-sft", str(tmp_path / "model_sft"), "--reward", "partial"]
    argv += ["--grpo-seeds", "1"]
    assert bench_learning.main(argv) == 0
    assert played and all(Path(spec.dataset).name == "course_grpo.json" for spec in played)
    grpo = bench_learning.load_model(again / "model_grpo", bench_learning.parse_args([]))
    assert (start.get_input_embeddings().weight == grpo.get_input_embeddings().weight).all()
    assert not (sft.model.layers[0].mlp.up_proj.weight == grpo.model.layers[0].mlp.up_proj.weight).all()
    sft_stages = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))["stages"]
    results = json.loads((again / "results.json").read_text(encoding="utf-8"))
    assert [s["stage"] for s in results["stages"]] == ["after SFT", "GRPO step 1"]
    (measured,) = [s for s in sft_stages if s["stage"] == "after SFT"]  # the SFT run's, not evaluated again
    assert {k: v for k, v in results["stages"][0].items() if k not in ("elapsed_s", "measured_in")} == {
        k: v for k, v in measured.items() if k != "elapsed_s"
    }
    assert results["stages"][0]["measured_in"] == str(tmp_path)
    assert results["model"] == json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))["model"]
    (step,) = [entry for entry in results["grpo_log"] if "ace/train/episodes" in entry]
    assert "rewards/ace_partial/mean" in step and "rewards/episode_score/mean" not in step
    assert step["rewards/ace_partial/mean"] == 0.5 and "reward" in step and "step" in step  # the plot's data
    assert (again / "learning.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


@pytest.mark.slow  # the tiny GGUF's byte-level prompts are ~9,000 tokens: TRL's step is most of it
def test_quick_pretrained_run__loads_a_gguf_file_resumes_and_combines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    from ace_gym.agents.llm import loading

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    converted: list[Path] = []
    real_dequantised = loading._dequantised

    def dequantised(source: Path) -> tuple:
        converted.append(source)
        return real_dequantised(source)

    monkeypatch.setattr(loading, "_dequantised", dequantised)
    autocast: list[bool] = []  # per evaluation: whether accelerate wrapped the model's forward in autocast
    real_measure = bench_learning.measure

    def measure(run: object, name: str, grpo_step: int, model: object, tokenizer: object) -> None:
        autocast.append(hasattr(model, "_original_forward"))
        real_measure(run, name, grpo_step, model, tokenizer)

    monkeypatch.setattr(bench_learning, "measure", measure)
    gguf = write_tiny_gguf(tmp_path / "tiny.gguf")
    run = tmp_path / "pretrained"
    argv = ["--quick", "--track", "pretrained", "--control", "shuffled", "--seed", "3", "--out", str(run)]
    argv += ["--gguf", str(gguf), "--model-cache", str(tmp_path / "cache")]
    # an accelerator run's memory options, and its time limit: GRPO stops at its first evaluation
    argv += ["--gradient-checkpointing", "--grpo-micro-batch", "1", "--grpo-steps", "3", "--time-limit", "1e-9"]
    assert bench_learning.main(argv) == 0
    assert converted == [gguf]  # through the library's GGUF loading, into the cache
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    assert [s["stage"] for s in results["stages"]] == ["zero-shot", "after SFT", "GRPO step 1"]
    assert autocast == [False, False, False]  # GRPO's evaluation in the numerics of those before it
    assert results["settings"]["temperature"] == bench_learning.TRACK_DEFAULTS["pretrained"]["temperature"]
    assert {"model", "sft", "evaluation", "grpo"} <= set(results["seconds"])
    assert len(results["sft_loss"]) == bench_learning.QUICK["pretrained"]["sft_steps"]
    (step,) = [entry for entry in results["grpo_log"] if "ace/train/episodes" in entry]
    assert "rewards/shuffled_episode_score/mean" in step  # the control's reward, named as such
    assert step["ace/train/episodes"] == 2 and step["num_tokens"] > 0
    (cached,) = (tmp_path / "cache").iterdir()
    start = bench_learning.load_model(cached, bench_learning.parse_args(["--track", "pretrained"]))
    grpo = bench_learning.load_model(run / "model_grpo", bench_learning.parse_args(["--track", "pretrained"]))
    assert start.get_input_embeddings().weight.requires_grad  # the pretrained track trains every weight
    assert not torch.equal(start.model.layers[0].mlp.up_proj.weight, grpo.model.layers[0].mlp.up_proj.weight)

    # the same command again: a finished run is resumed, nothing trained or measured again (its
    # time limit is how it runs, not what it computes: another one is no other run)
    assert bench_learning.main([*argv, "--time-limit", "1000"]) == 0
    again = json.loads((run / "results.json").read_text(encoding="utf-8"))
    assert again["stages"] == results["stages"] and again["grpo_log"] == results["grpo_log"]
    assert {k: v for k, v in again["seconds"].items() if k != "data"} == {
        k: v for k, v in results["seconds"].items() if k != "data"
    }  # only the dataset files were written again
    assert converted == [gguf]
    with pytest.raises(bench_learning.ConfigError, match=r"holds a run with other settings \(seed\)"):
        bench_learning.main([*argv, "--seed", "4"])

    # the run and a copy of it as another arm and seed that stopped before GRPO, combined
    stopped = tmp_path / "stopped"
    stopped.mkdir()
    copy = {**again, "settings": {**again["settings"], "control": "none", "seed": 5}, "stages": again["stages"][:2]}
    (stopped / "results.json").write_text(json.dumps(copy), encoding="utf-8")
    summary = tmp_path / "summary.json"
    assert bench_learning.main(["combine", str(run), str(stopped), "--out", str(summary)]) == 0
    rows = json.loads(summary.read_text(encoding="utf-8"))["rows"]
    assert [(row["track"], row["control"], row["seeds"]) for row in rows] == [
        ("pretrained", "none", [5]),
        ("pretrained", "shuffled", [3]),
    ]
    assert rows[0]["grpo_steps"] == 0 and rows[1]["grpo_steps"] == 1
    assert rows[0]["gain_greedy"] == {"mean": 0.0, "low": 0.0, "high": 0.0, "n": 1}  # its start is its end
    start, final = again["stages"][1], again["stages"][-1]
    assert rows[1]["gain_sampled"]["mean"] == final["sampled"]["success_rate"] - start["sampled"]["success_rate"]
    assert rows[1]["seconds"] == again["seconds"]
    with pytest.raises(bench_learning.ConfigError, match=r"holds no results\.json"):
        bench_learning.main(["combine", str(tmp_path / "cache")])


@pytest.mark.slow  # a quick run stopped in its second GRPO step
def test_stopped_run__keeps_its_grpo_log_and_combine_plots_its_curves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    real_measure = bench_learning.measure

    class Stopped(Exception):
        pass

    def measure(run: object, name: str, grpo_step: int, *rest: object) -> None:
        if grpo_step == 2:
            raise Stopped  # as a run killed at its deadline
        real_measure(run, name, grpo_step, *rest)

    monkeypatch.setattr(bench_learning, "measure", measure)
    run = tmp_path / "run"
    argv = ["--quick", "--out", str(run), "--pretrain-steps", "0", "--warmup-steps", "0"]
    with pytest.raises(Stopped):
        bench_learning.main([*argv, "--grpo-steps", "2", "--grpo-eval-every", "1", "--save-every", "1"])
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    assert [s["stage"] for s in results["stages"]][-2:] == ["after SFT", "GRPO step 1"]
    (step,) = [entry for entry in results["grpo_log"] if "reward" in entry]  # the finished step, kept
    assert step["step"] == 1 and "wall_s" not in results

    plot = tmp_path / "curves.png"
    assert bench_learning.main(["combine", str(run), "--plot", str(plot)]) == 0
    assert plot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")

    # compare: the SFT model and the step-1 checkpoint on the same held-out instances
    (checkpoint,) = (run / "grpo").glob("checkpoint-*")
    compared = tmp_path / "compare"
    argv = [str(run / "model_sft"), str(checkpoint), "--quick", "--heldout-seeds", "3", "--out", str(compared)]
    assert bench_learning.main(["compare", *argv]) == 0
    summary = json.loads((compared / "compare.json").read_text(encoding="utf-8"))
    for mode in ("greedy", "sampled"):
        start, end = summary["start"][mode], summary["end"][mode]
        assert start["episodes"] == end["episodes"] == 3 and len(start["solved"]) == len(end["solved"]) == 3
        assert summary["gains"][mode]["mean"] == pytest.approx(end["success_rate"] - start["success_rate"], abs=1e-4)
    # a model against itself: the same instances and sampling seed, so the same episodes and no gain
    argv = [str(run / "model_sft"), str(run / "model_sft"), *argv[2:]]
    assert bench_learning.main(["compare", *argv]) == 0
    summary = json.loads((compared / "compare.json").read_text(encoding="utf-8"))
    for mode in ("greedy", "sampled"):
        assert summary["start"][mode] == summary["end"][mode]
        assert summary["gains"][mode] == {"mean": 0.0, "low": 0.0, "high": 0.0, "n": 3}
    with pytest.raises(bench_learning.ConfigError, match="end"):  # refused before any evaluation
        bench_learning.main(["compare", str(run / "model_sft"), str(run), "--quick", "--out", str(compared)])
    with pytest.raises(SystemExit):  # the folders come first
        bench_learning.main(["compare", "--quick", str(run / "model_sft"), str(checkpoint)])


def test_sft_stage__is_the_saving_runs_own_after_sft_stage_where_it_evaluated_alike(tmp_path: Path) -> None:
    from ace_gym.runs.results import encode_json

    args = bench_learning.parse_args(["--out", str(tmp_path / "arm"), "--reward", "partial"])
    stage = {"stage": "after SFT", "grpo_step": 0, "elapsed_s": 9.0, "success_rate": 0.25}
    (tmp_path / "model_sft").mkdir()
    (tmp_path / "model_grpo").mkdir()

    def saved(**changed: object) -> None:
        settings = json.loads(encode_json({**vars(bench_learning.parse_args([])), **changed}))
        (tmp_path / "results.json").write_text(json.dumps({"settings": settings, "stages": [stage]}), "utf-8")

    saved(grpo_lr=3e-4, control="shuffled")  # settings of training only: the same evaluation
    assert bench_learning.sft_stage(tmp_path / "model_sft", args) == {**stage, "measured_in": str(tmp_path)}
    assert bench_learning.sft_stage(tmp_path / "model_grpo", args) is None  # the run's, but not its SFT model
    for key, value in (("max_new_tokens", 64), ("heldout_seeds", 50), ("seed", 1), ("temperature", 0.7)):
        saved(**{key: value})
        assert bench_learning.sft_stage(tmp_path / "model_sft", args) is None, key
    (tmp_path / "results.json").unlink()
    assert bench_learning.sft_stage(tmp_path / "model_sft", args) is None


def test_shuffled_within_groups__permutes_each_groups_rewards_by_the_step() -> None:
    def reward(ace_episode: list, **_: object) -> list[float]:
        return [float(value) for value in ace_episode]

    class State:
        global_step = 5

    control = bench_learning.ShuffledWithinGroups(reward, 4, seed=0)
    assert control.__name__ == "shuffled_reward"
    values = list(range(12))
    draws = [control(ace_episode=values, trainer_state=State()) for _ in range(2)]
    assert draws[0] == draws[1]  # a function of (seed, step), not of how often it was called
    for start in (0, 4, 8):  # each group keeps its own rewards
        assert sorted(draws[0][start : start + 4]) == values[start : start + 4]
    assert draws[0] != [float(value) for value in values]
    State.global_step = 6
    assert control(ace_episode=values, trainer_state=State()) != draws[0]


def test_gain_interval__over_seeds_with_t_and_over_one_runs_paired_episodes() -> None:
    one = bench_learning.gain_interval([([0, 0, 1, 1], [1, 1, 1, 0])])
    assert one["mean"] == 0.25 and one["n"] == 4  # differences +1 +1 0 -1: sd 0.957, half 1.96 * 0.957 / 2
    assert one["low"] == pytest.approx(0.25 - 0.938, abs=1e-3) and one["high"] == pytest.approx(0.25 + 0.938, abs=1e-3)
    seeds = bench_learning.gain_interval([([0, 0], [1, 0]), ([0, 0], [1, 1]), ([0, 1], [1, 1])])
    assert seeds["mean"] == pytest.approx(2 / 3, abs=1e-4) and seeds["n"] == 3  # gains 0.5, 1.0, 0.5: t(2) = 4.303
    assert seeds["high"] - seeds["mean"] == pytest.approx(4.303 * 0.288675 / 3**0.5, abs=1e-3)


def test_summarise_runs__compares_runs_stopped_at_different_steps_at_the_last_step_all_reached() -> None:
    def run(seed: int, finals: dict[int, list[int]]) -> dict:
        stages = [
            {"grpo_step": step, "episodes": 2, "success_rate": sum(s) / 2, "solved": s} for step, s in finals.items()
        ]
        for stage in stages:
            stage["sampled"] = dict(stage)
        return {"settings": {"seed": seed}, "stages": stages}

    (row,) = bench_learning.summarise_runs(
        [run(0, {0: [0, 0], 20: [1, 0], 40: [1, 1], 60: [0, 0]}), run(1, {0: [0, 0], 20: [0, 0], 40: [1, 1]})]
    )
    assert row["grpo_steps"] == 40
    assert row["final_greedy"] == row["final_sampled"] == 1.0  # seed 0 at step 40, not its step 60
    assert row["gain_greedy"]["mean"] == 1.0
    (early,) = bench_learning.summarise_runs([run(0, {0: [0, 0], 20: [1, 0], 40: [1, 1]})], at_step=30)
    assert (early["grpo_steps"], early["final_greedy"]) == (20, 0.5)  # its last evaluation by step 30


def test_summarise_runs__a_stage_time_is_the_mean_over_the_runs_that_finished_it() -> None:
    """A run stopped before its GRPO stage ended has no ``grpo`` seconds: it is left out of that
    stage's mean, not counted as 0."""
    stages = [{"grpo_step": 0, "episodes": 1, "success_rate": 0.0, "solved": [0]}]
    stages[0]["sampled"] = dict(stages[0])
    finished = {"settings": {"seed": 0}, "stages": stages, "seconds": {"data": 4.0, "grpo": 300.0}}
    stopped = {"settings": {"seed": 1}, "stages": stages, "seconds": {"data": 6.0}}
    (row,) = bench_learning.summarise_runs([finished, stopped])
    assert row["seconds"] == {"data": 5.0, "grpo": 300.0}


def test_episode_metrics__counts_solved_episodes_unread_turns_and_refused_calls() -> None:
    def turn(calls: list[bool], parse_errors: tuple[str, ...] = ()) -> dict:
        return {"info": {"calls": [{"ok": ok} for ok in calls], "parse_errors": list(parse_errors)}}

    solved = {
        "score": 1.0,
        "instance_index": 1,
        "domain": "course",
        "hidden_slots": 1,
        "decoy_budget": 0,
        "usage": {"turns": 2},
    }
    solved["turns"] = [turn([True, False]), turn([True])]
    failed = {
        "score": 0.0,
        "instance_index": 0,
        "domain": "course",
        "hidden_slots": 2,
        "decoy_budget": 0,
        "usage": {"turns": 2},
    }
    failed["turns"] = [turn([]), turn([True], ("bad json",))]
    metrics = bench_learning.episode_metrics([solved, failed])
    assert metrics["success_rate"] == 0.5 and metrics["mean_score"] == 0.5
    assert metrics["parse_error_rate"] == 0.5  # the turn without a call and the turn with a bad call
    assert metrics["invalid_call_rate"] == 0.25  # one of the four executed calls was refused
    assert metrics["mean_turns"] == 2.0 and metrics["tool_calls"] == 4
    assert metrics["solved"] == [0, 1]  # in instance order


def test_episode_metrics__filled_counts_episodes_with_an_accepted_set_slot() -> None:
    def record(score: float, calls: list[tuple[str, bool]], index: int) -> dict:
        turn = {"info": {"calls": [{"tool": tool, "ok": ok} for tool, ok in calls], "parse_errors": []}}
        return {
            "score": score,
            "instance_index": index,
            "domain": "course",
            "hidden_slots": 1,
            "decoy_budget": 0,
            "usage": {"turns": 1},
            "turns": [turn],
        }

    records = [
        record(1.0, [("query", True), ("set_slot", True)], 0),  # filled and solved
        record(0.0, [("set_slot", True)], 1),  # filled with the wrong candidate
        record(0.0, [("set_slot", False), ("query", True)], 2),  # its set_slot refused: not filled
        record(0.0, [("query", True)], 3),
    ]
    metrics = bench_learning.episode_metrics(records)
    assert metrics["filled_rate"] == 0.5 and metrics["success_when_filled"] == 0.5
    assert bench_learning.episode_metrics(records[2:])["success_when_filled"] == 0.0


def _slip_specs(tmp_path: Path, count: int) -> list:
    import dataclasses

    args = bench_learning.parse_args(["--train-seeds", str(count), "--heldout-seeds", "1", "--out", str(tmp_path)])
    train, _ = bench_learning.make_specs(args, tmp_path)
    return [dataclasses.replace(spec, trial=k) for k, spec in enumerate(train)]


def test_slipping_solver__every_slip_is_refused_then_recovered(tmp_path: Path) -> None:
    from ace_gym.eval import run_episodes

    records = list(run_episodes(_slip_specs(tmp_path, 6), bench_learning.SlippingSolver(1.0)))
    for record in records:
        assert record["score"] == 1.0 and record["notes"]["slipped"]
        fills = [
            (json.loads(sent["function"]["arguments"])["id"], result["ok"])
            for turn in record["turns"]
            for sent, result in zip(turn["action"]["tool_calls"], turn["info"]["calls"], strict=True)
            if result["tool"] == "set_slot"
        ]
        assert [ok for _, ok in fills] == [False, True]  # the made-up id refused, then the right one
        made_up, right = (sent for sent, _ in fills)
        assert made_up != right and len(made_up) == len(right) and made_up[0] == right[0]


def test_slipping_solver__slips_in_the_drawn_share_and_otherwise_plays_the_solver(tmp_path: Path) -> None:
    from ace_gym.eval import run_episodes
    from ace_gym.policies import make_policy

    specs = _slip_specs(tmp_path, 40)

    def play(policy: object) -> list:
        return sorted(run_episodes(specs, policy), key=lambda record: record["trial"])  # in spec order

    slipping = play(bench_learning.SlippingSolver(0.5))
    solver = play(make_policy("solver-batch"))
    slipped = [bool(record["notes"].get("slipped")) for record in slipping]
    assert 0 < sum(slipped) < len(specs)  # drawn per episode (its trial), not once for all
    for record, reference, slip in zip(slipping, solver, slipped, strict=True):
        assert len(record["turns"]) == len(reference["turns"]) + slip
        if not slip:
            assert [t["action"] for t in record["turns"]] == [t["action"] for t in reference["turns"]]
    again = play(bench_learning.SlippingSolver(0.5))
    assert [r["messages"] for r in again] == [r["messages"] for r in slipping]  # a function of the specs


@pytest.mark.parametrize("observation", ["compact", "full"])
def test_slipping_solver__guessing_fills_with_an_id_the_slots_replies_listed(tmp_path: Path, observation: str) -> None:
    """Whatever form the replies take: read as compact replies only, the full ones listed
    nothing and the teacher filled the solver's own id (every episode solved)."""
    import dataclasses

    from ace_gym.eval import run_episodes
    from ace_gym.policies import make_policy

    specs = [
        dataclasses.replace(
            spec,
            stack=dataclasses.replace(spec.stack, env_kwargs={**spec.stack.env_kwargs, "observation": observation}),
        )
        for spec in _slip_specs(tmp_path, 40)
    ]

    def play(policy: object) -> list:
        return sorted(run_episodes(specs, policy), key=lambda record: record["trial"])

    guessing = play(bench_learning.SlippingSolver(0.5, guess=True))
    solver = play(make_policy("solver-batch"))
    right = 0
    for record, reference in zip(guessing, solver, strict=True):
        listed, fills = set(), []
        for message in record["messages"]:
            for call in message.get("tool_calls") or ():
                if call["function"]["name"] == "set_slot":
                    fills.append(json.loads(call["function"]["arguments"])["id"])
            if message["role"] == "tool" and '"matches"' in message["content"]:
                reply = json.loads(message["content"])
                matches = reply["matches"] if "matches" in reply else reply["data"]["matches"]
                listed |= {match if isinstance(match, str) else match["id"] for match in matches}
        assert fills[-1] in listed  # the last fill a guess among the listed ids (a slip's made-up id is not)
        right += record["score"] == 1.0
        assert len(record["turns"]) == len(reference["turns"]) + bool(record["notes"].get("slipped"))
    assert 0 < right < len(specs) * 0.6  # the choice is a guess: some right, most not (the solver: all)
    again = play(bench_learning.SlippingSolver(0.5, guess=True))
    assert [r["messages"] for r in again] == [r["messages"] for r in guessing]


@pytest.mark.parametrize("rate", [-0.1, 1.5, float("nan")])
def test_slipping_solver__refuses_a_slip_rate_outside_zero_to_one(rate: float) -> None:
    from ace_gym.errors import ConfigError

    with pytest.raises(ConfigError, match="slip_rate"):
        bench_learning.SlippingSolver(rate)


def test_fill_end__is_just_after_the_last_id_the_assistant_wrote() -> None:
    ids = [7, 42, 5, 42, 9, 43, 43, 9]  # 42 and 43: id tokens; the tool replies' 42 and 43 are not the assistant's
    mask = [0, 1, 1, 0, 0, 1, 0, 0]  # the assistant wrote 42 then 43: its last one counts
    assert bench_learning.fill_end({"input_ids": ids, "loss_mask": mask}, {42, 43}) == 6
    assert bench_learning.fill_end({"input_ids": ids, "loss_mask": [0] * 8}, {42, 43}) == 0


def test_parse_args__a_warm_up_without_whole_id_tokens_is_a_config_error() -> None:
    from ace_gym.errors import ConfigError

    with pytest.raises(ConfigError, match="warmup_steps"):
        bench_learning.parse_args(["--no-whole-ids"])
    assert not bench_learning.parse_args(["--no-whole-ids", "--warmup-steps", "0"]).whole_ids
    assert not bench_learning.parse_args(["--no-whole-ids", "--from-sft", "runs/x/model_sft"]).whole_ids  # no warm-up


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["--train-seeds", "10001"], "train_seeds"),  # would train on held-out seeds
        (["--train-seeds", "0"], "train_seeds"),
        (["--heldout-seeds", "10001"], "heldout_seeds"),  # would reach GRPO's seeds
        (["--grpo-seeds", "-1"], "grpo_seeds"),
        (["--sft-batch", "0"], "sft_batch"),
        (["--warmup-batch", "0"], "warmup_batch"),
        (["--group-size", "1"], "group_size"),
        (["--save-every", "0"], "save_every"),
        (["--track", "pretrained", "--eval-batch", "0"], "eval_batch"),
        (["--grpo-micro-batch", "3"], "grpo_micro_batch"),  # does not divide a step's 64 episodes
        (["--grpo-micro-batch", "128"], "grpo_micro_batch"),
        (["--time-limit", "-1"], "time_limit"),
        (["--time-limit", "inf"], "time_limit"),
    ],
)
def test_parse_args__seed_ranges_that_overlap_and_empty_batches_are_config_errors(argv: list[str], field: str) -> None:
    from ace_gym.errors import ConfigError

    with pytest.raises(ConfigError, match=field):
        bench_learning.parse_args(argv)
    assert bench_learning.parse_args(["--train-seeds", "10000", "--heldout-seeds", "10000"]).train_seeds == 10000


def test_main__a_cuda_run_where_torch_sees_no_cuda_device_is_a_config_error(tmp_path: Path) -> None:
    import torch

    from ace_gym.errors import ConfigError

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    with pytest.raises(ConfigError, match="device"):
        bench_learning.main(["--quick", "--device", "cuda", "--out", str(tmp_path)])
    assert not (tmp_path / "results.json").exists()  # refused before anything ran


def test_parse_args__a_track_sets_its_defaults_and_given_options_win() -> None:
    scratch = bench_learning.parse_args([])
    assert (scratch.temperature, scratch.lr_schedule, scratch.prompts_per_step, scratch.group_size) == (
        0.5,
        "constant",
        8,
        8,
    )
    assert scratch.grpo_seeds > 0 and 150 <= scratch.grpo_steps <= 300 and not scratch.train_output_layer
    pretrained = bench_learning.parse_args(["--track", "pretrained"])
    for name, value in bench_learning.TRACK_DEFAULTS["pretrained"].items():
        assert getattr(pretrained, name) == value
    assert bench_learning.parse_args(["--track", "pretrained", "--temperature", "0.3"]).temperature == 0.3
    quick = bench_learning.parse_args(["--quick", "--track", "pretrained", "--grpo-steps", "0"])
    assert quick.grpo_steps == 0 and quick.sft_steps == bench_learning.QUICK["pretrained"]["sft_steps"]
