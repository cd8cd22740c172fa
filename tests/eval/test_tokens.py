"""``ace-gym tokens``: rows per domain and H, the JSON report, the estimate against a real (tiny,
local) tokenizer through its chat template, counts that add up, and one clear error for a bad
``--tokenizer``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ace_gym.cli import main
from ace_gym.domains import DOMAIN_NAMES
from ace_gym.eval.episode_spec import EpisodeSpec
from ace_gym.eval.fit import FIT
from ace_gym.eval.tokens import MEASURES, TokenEpisode, measure
from ace_gym.exit_codes import EXIT_CONFIG
from ace_gym.runs.tokens import ApproxTokenizer, HFTokenizer, message_tokens
from tests.missing_modules import without_modules

ROW_KEYS = {"domain", "hidden_slots", "episodes", "score", *MEASURES}
COURSE_H1 = ["--domains", "course", "--hidden-slots", "1", "--decoy-budgets", "0,2"]  # two instances


def tokens_json(capsys: pytest.CaptureFixture, *args: str) -> dict[str, Any]:
    assert main(["tokens", "--no-progress", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def one_error_line(capsys: pytest.CaptureFixture) -> str:
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in lines[0], lines
    return lines[0]


def test_tokens__rows_for_every_domain_and_h_of_the_5x5_data_with_the_solver(capsys: pytest.CaptureFixture) -> None:
    report = tokens_json(capsys, "--hidden-slots", "1,5")
    assert report["policy"] == "solver" and report["source"] == {"dataset": "5x5"}
    assert report["tokenizer"] == "estimate" and report["counted_by"] == ["messages"]
    rows = report["rows"]
    assert [(r["domain"], r["hidden_slots"]) for r in rows] == [(d, h) for d in [*DOMAIN_NAMES, "all"] for h in (1, 5)]
    for row in rows:
        assert set(row) == ROW_KEYS and row["score"] == 1.0
        assert row["episodes"] == (42 if row["domain"] == "all" else 7)
        for name in MEASURES:
            assert set(row[name]) == {"mean", "max"} and 0 < row[name]["mean"] <= row[name]["max"]
        assert row["response_tokens"]["mean"] == pytest.approx(
            row["model_tokens"]["mean"] + row["tool_tokens"]["mean"], abs=0.11
        )  # means rounded to 0.1
    overall = {r["hidden_slots"]: r for r in rows if r["domain"] == "all"}
    # the solver's turns on the bundled data, as issue 29 measured them
    assert (overall[1]["turns"]["mean"], overall[1]["turns"]["max"]) == (15.5, 19)
    assert (overall[5]["turns"]["mean"], overall[5]["turns"]["max"]) == (39.1, 45)
    assert overall[5]["response_tokens"]["mean"] > 2 * overall[1]["response_tokens"]["mean"]


def test_tokens__text_table_names_what_was_counted(capsys: pytest.CaptureFixture) -> None:
    assert main(["tokens", "--no-progress", *COURSE_H1]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "tokenizer estimate" in lines[0] and lines[1].split()[:4] == ["domain", "H", "episodes", "score"]
    assert lines[2].split()[:4] == ["course", "1", "2", "1"] and len(lines) == 3


def _episodes() -> list[TokenEpisode]:
    specs = [EpisodeSpec.of("course", instance_index=index, seed=3) for index in (0, 12)]  # H=1 and H=5
    return [TokenEpisode(s.stack, s.seed, s.reset_options(), s.policy_seed()) for s in specs]


def _conversation(spec_index: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The messages and tools of the solver's episode on course instance ``spec_index`` (seed 3)."""
    from ace_gym.eval.rollout import run_episodes
    from ace_gym.policies import make_scripted_policy

    record = next(
        run_episodes([EpisodeSpec.of("course", instance_index=spec_index, seed=3)], make_scripted_policy("solver"))
    )
    return record["messages"], record["tools"]


def test_estimate__counts_the_adapter_conversation_message_by_message() -> None:
    measured = list(measure(_episodes(), "solver", ApproxTokenizer()))
    messages, tools = _conversation(0)
    tokenizer = ApproxTokenizer()
    opening = messages[:2]
    assert [m["role"] for m in opening] == ["system", "user"]
    first = measured[0]
    assert first["prompt_tokens"] == sum(message_tokens(tokenizer, m) for m in opening) + tokenizer.count(
        json.dumps(tools, ensure_ascii=False)
    )
    assert first["model_tokens"] == sum(message_tokens(tokenizer, m) for m in messages if m["role"] == "assistant")
    assert first["tool_tokens"] == sum(message_tokens(tokenizer, m) for m in messages[2:] if m["role"] != "assistant")
    assert first["turns"] == sum(m["role"] == "assistant" for m in messages)
    for episode in measured:
        assert episode["response_tokens"] == episode["model_tokens"] + episode["tool_tokens"]
        assert episode["counted_by"] == "messages" and episode["score"] == 1.0


# A template that writes the last assistant turn differently (as Qwen3's writes an empty thinking
# block only there): not prefix-stable.
REWRITES_LAST_TURN = (
    "{% for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content or '' }}"
    "{% if message.role == 'assistant' and loop.last %}<think></think>{% endif %}"
    "{% for call in message.tool_calls or [] %}<tool_call>{{ call.function.name }} "
    "{{ call.function.arguments | tojson }}</tool_call>{% endfor %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="module")
def tiny_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small byte-level BPE trained on ACE text, saved with Qwen2.5's chat template (no download)."""
    pytest.importorskip("transformers", reason="the hf extra installs transformers")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from ace_gym.agents.llm.tiny_model import CHAT_TEMPLATE_FILE, SPECIAL_TOKENS

    messages, tools = _conversation(0)
    corpus = [json.dumps(tools), *(json.dumps(m) for m in messages)]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=800,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(corpus, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|pad|>")
    tokenizer.chat_template = CHAT_TEMPLATE_FILE.read_text(encoding="utf-8")
    path = tmp_path_factory.mktemp("tokenizer")
    tokenizer.save_pretrained(path)
    return path


def test_tokenizer__counts_what_the_chat_template_renders(tiny_tokenizer: Path, capsys: pytest.CaptureFixture) -> None:
    tokenizer = HFTokenizer(tiny_tokenizer)
    measured = list(measure(_episodes()[:1], "solver", tokenizer))
    estimated = list(measure(_episodes()[:1], "solver", ApproxTokenizer()))
    messages, tools = _conversation(0)
    hf = tokenizer.tokenizer
    render = hf.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)
    opening = hf.apply_chat_template(messages[:2], tools=tools, add_generation_prompt=True, tokenize=False)
    first = measured[0]
    assert first["counted_by"] == "chat_template"
    assert first["prompt_tokens"] == len(hf.encode(opening, add_special_tokens=False))
    # prefix-stable template: the turn-by-turn ids are the whole conversation's text, tokenised a
    # turn at a time (as a rollout grows it): a BPE merge across a turn's edge may differ
    whole = len(hf.encode(render, add_special_tokens=False))
    assert abs(first["prompt_tokens"] + first["response_tokens"] - whole) <= first["turns"]
    assert first["model_tokens"] > 10 * first["turns"] and first["tool_tokens"] > first["model_tokens"]
    for exact, estimate in zip(measured, estimated, strict=True):
        assert exact["response_tokens"] == exact["model_tokens"] + exact["tool_tokens"]
        assert exact["turns"] == estimate["turns"] and exact["score"] == estimate["score"] == 1.0
        for name in ("prompt_tokens", "model_tokens", "tool_tokens"):  # another count of the same text
            assert exact[name] != estimate[name] and 0.25 < exact[name] / estimate[name] < 4, name

    report = tokens_json(capsys, *COURSE_H1, "--tokenizer", str(tiny_tokenizer))
    assert report["tokenizer"] == str(tiny_tokenizer) and report["counted_by"] == ["chat_template"]
    assert [(r["domain"], r["hidden_slots"], r["episodes"]) for r in report["rows"]] == [("course", 1, 2)]


def test_tokenizer__a_template_that_rewrites_earlier_turns_is_counted_per_message(
    tiny_tokenizer: Path, tmp_path: Path
) -> None:
    from transformers import AutoTokenizer

    rewriting = AutoTokenizer.from_pretrained(tiny_tokenizer)
    rewriting.chat_template = REWRITES_LAST_TURN
    rewriting.save_pretrained(tmp_path)
    tokenizer = HFTokenizer(tmp_path)
    (episode,) = measure(_episodes()[:1], "solver", tokenizer)
    messages, tools = _conversation(0)
    assert episode["counted_by"] == "messages"
    schemas = tokenizer.count(json.dumps(tools, ensure_ascii=False))
    assert episode["prompt_tokens"] == sum(message_tokens(tokenizer, m) for m in messages[:2]) + schemas
    assert episode["model_tokens"] == sum(message_tokens(tokenizer, m) for m in messages if m["role"] == "assistant")
    assert episode["response_tokens"] == episode["model_tokens"] + episode["tool_tokens"]


def test_bad_tokenizer__is_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["tokens", "--no-progress", *COURSE_H1, "--tokenizer", str(tmp_path / "missing")]) == EXIT_CONFIG
    line = one_error_line(capsys)
    assert line.startswith("ace-gym tokens: tokenizer=") and "local directory" in line
    pytest.importorskip("transformers", reason="the hf extra installs transformers")
    (tmp_path / "empty").mkdir()
    assert main(["tokens", "--no-progress", *COURSE_H1, "--tokenizer", str(tmp_path / "empty")]) == EXIT_CONFIG
    assert "holds no tokenizer" in one_error_line(capsys)


def test_tokenizer_without_transformers__is_one_config_error(tmp_path: Path) -> None:
    script = without_modules(["transformers"]) + (
        "from ace_gym.cli import main\n"
        f"sys.exit(main(['tokens', '--no-progress', '--domains', 'course', '--tokenizer', {str(tmp_path)!r}]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == EXIT_CONFIG and len(lines) == 1, done.stderr
    assert "needs transformers" in lines[0] and ".[hf]" in lines[0]


def test_bad_policy_preset_and_selection__are_config_errors(capsys: pytest.CaptureFixture) -> None:
    for args in (
        ["--policy", "hf:/some/model"],
        ["--policy", "solvr"],
        ["--preset", "procedural-9x9"],
        ["--preset", "procedural", "--hidden-slots", "2"],
        ["--hidden-slots", "2"],
    ):
        assert main(["tokens", "--no-progress", "--domains", "course", *args]) == EXIT_CONFIG, args
        one_error_line(capsys)


def test_preset__plays_episodes_per_domain_and_h_deterministically(capsys: pytest.CaptureFixture) -> None:
    args = ["--preset", "procedural", "--domains", "course,meal", "--hidden-slots", "1", "--episodes", "2"]
    report = tokens_json(capsys, *args)
    assert report["source"] == {"preset": "procedural"}
    assert [(r["domain"], r["hidden_slots"], r["episodes"]) for r in report["rows"]] == [
        ("course", 1, 2),
        ("meal", 1, 2),
        ("all", 1, 4),
    ]
    assert all(r["score"] == 1.0 for r in report["rows"])
    assert tokens_json(capsys, *args) == report
    assert tokens_json(capsys, *args, "--seed", "5") != report


def test_env_flags__change_what_is_played(capsys: pytest.CaptureFixture) -> None:
    capped = tokens_json(capsys, *COURSE_H1, "--max-turns", "5")["rows"][0]
    assert capped["turns"]["max"] == 5 and capped["score"] < 1.0  # cut off: the solver needs 12 or more turns on one


def test_fit__halves_the_solvers_response_tokens_and_turns_at_h15(capsys: pytest.CaptureFixture) -> None:
    """Issue 29's target, from the command's own JSON on the bundled 5x5 data: at H=15 the fit
    settings (FIT: compact observations, the batching solver) need at most half the default's
    response tokens and turns, solving every episode."""
    compared = tokens_json(capsys, "--hidden-slots", "15", "--compare")
    default, fit = compared["default"], compared["fit"]
    assert (default["policy"], default["settings"], default["env_kwargs"]) == ("solver", "default", {})
    assert (fit["policy"], fit["settings"], fit["env_kwargs"]) == ("solver-batch", "fit", FIT["env_kwargs"])
    keys = [(d, 15) for d in [*DOMAIN_NAMES, "all"]]
    assert [(r["domain"], r["hidden_slots"]) for r in compared["ratios"]] == keys
    for side in (default, fit):
        assert [(r["domain"], r["hidden_slots"]) for r in side["rows"]] == keys
        assert all(set(r) == ROW_KEYS and r["score"] == 1.0 for r in side["rows"])
    for ratio, base, fitted in zip(compared["ratios"], default["rows"], fit["rows"], strict=True):
        for name in ("response_tokens", "turns"):
            assert ratio[name] == round(fitted[name]["mean"] / base[name]["mean"], 3) <= 0.5, (ratio, name)
        assert fitted["turns"]["max"] <= 5 and fitted["response_tokens"]["max"] < base["response_tokens"]["max"] / 2
    # --fit alone prints the fit side, --json alone the default side: the same rows
    assert tokens_json(capsys, "--hidden-slots", "15", "--fit", "--domains", "course") == {
        **fit,
        "rows": [r for r in fit["rows"] if r["domain"] == "course"],
    }
    assert tokens_json(capsys, "--hidden-slots", "15", "--domains", "course")["rows"] == default["rows"][:1]


def test_fit__keeps_a_named_policy_and_refuses_fit_with_compare(capsys: pytest.CaptureFixture) -> None:
    solver = tokens_json(capsys, *COURSE_H1, "--fit", "--policy", "solver")
    assert solver["policy"] == "solver" and solver["settings"] == "fit"
    batched = tokens_json(capsys, *COURSE_H1, "--fit")
    assert solver["rows"][0]["turns"]["mean"] > batched["rows"][0]["turns"]["mean"]  # one call a turn, compact
    assert main(["tokens", "--no-progress", *COURSE_H1, "--compare"]) == 0
    text = capsys.readouterr().out
    assert "default settings" in text and "fit settings" in text and "fit / default" in text
    with pytest.raises(SystemExit):
        main(["tokens", "--no-progress", *COURSE_H1, "--fit", "--compare"])


BROKEN_TEMPLATES = {
    "raises": "{{ raise_exception('this template refuses tools') }}",
    "undefined": "{{ messages[0].no_such_key.deeper }}",
    "syntax": "{% for message in messages %}{{ message.content }",
    "loops too long": "{% for i in range(10**9) %}x{% endfor %}",
    "lone surrogate": "{{ messages[0].content }}\ud800",
}


@pytest.mark.parametrize("broken", sorted(BROKEN_TEMPLATES))
def test_tokenizer__a_chat_template_that_fails_is_one_line_exit_2(
    tiny_tokenizer: Path, tmp_path: Path, capsys: pytest.CaptureFixture, broken: str
) -> None:
    """Issue 40: a jinja2 traceback and exit 1."""
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(tiny_tokenizer).save_pretrained(tmp_path)
    (tmp_path / "chat_template.jinja").unlink(missing_ok=True)  # the template as tokenizer_config.json holds it
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    config["chat_template"] = BROKEN_TEMPLATES[broken]  # a lone surrogate written as its JSON escape
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    assert main(["tokens", "--no-progress", *COURSE_H1, "--tokenizer", str(tmp_path)]) == EXIT_CONFIG
    line = one_error_line(capsys)
    assert line.startswith(f"ace-gym tokens: tokenizer='{tmp_path}': its chat template")


@pytest.mark.parametrize("source", [[], ["--preset", "procedural"]], ids=["dataset", "preset"])
def test_tokens__a_negative_seed_is_one_line_exit_2(capsys: pytest.CaptureFixture, source: list[str]) -> None:
    """Issue 40: a traceback and exit 1."""
    domains = ["--domains", "course", "--hidden-slots", "1"] if source else COURSE_H1
    assert main(["tokens", "--no-progress", *domains, *source, "--seed", "-1"]) == EXIT_CONFIG
    assert "seed=-1" in one_error_line(capsys)
