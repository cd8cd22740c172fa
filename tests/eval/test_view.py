"""``ace-gym view``: the HTML page of a run, built from real eval runs and hostile records, read in
a headless Chromium (tests/browser.py; skipped with a reason where none is installed)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from ace_gym.cli import main
from ace_gym.eval.view import MAX_TEXT_CHARS, displayable, episode_row, script_json, write_view
from ace_gym.eval.view_grids import TurnGrids
from ace_gym.exit_codes import EXIT_CONFIG, EXIT_MALFORMED
from ace_gym.instance import resolve_dataset
from ace_gym.longbench.question_types import QUESTION_TYPES
from ace_gym.longbench.rollout import qa_specs, run_qa_episodes
from ace_gym.runs.results import EPISODES_FILE, MalformedRecordsError, encode_json, read_records
from tests.browser import console_errors, headless_chromium
from tests.eval.view_runs import llm_run
from tests.longbench.answers import NonsenseEngine, OracleEngine

PAYLOAD = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'


def _eval(out: Path, *flags: str) -> Path:
    argv = ["eval", "--dataset", "5x5", "--domains", "course", "--out", str(out), *flags]
    assert main(argv) == 0
    return out


def _write_records(folder: Path, records: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / EPISODES_FILE).write_bytes(b"".join(encode_json(record) + b"\n" for record in records))
    return folder


def _alb_record(key: str, **fields: Any) -> dict[str, Any]:
    return {
        "key": key,
        "policy": "openai:model@http://x",
        "env_id": "ALB-QA-v0",
        "domain": "kf-c",
        "question_type": "count",
        "bucket": "32k",
        "score": None,
        "gt": "7",
        "prediction": None,
        "raw_response": "I think <answer>seven</answer>",
        "messages": [{"role": "user", "content": "How many items?"}, {"role": "assistant", "content": "seven"}],
        "context_omitted": True,
        **fields,
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("view")
    rounds = _eval(
        root / "rounds",
        "--policy", "greedy-revise", "--hidden-slots", "5", "--decoy-budgets", "0", "2",
        "--feedback-rounds", "2", "--threshold", "1.0", "--tool-failure-rates", "0.2",
    )  # fmt: skip
    planning = _eval(root / "planning", "--policy", "solver", "--hidden-slots", "1", "--wrappers", "unsolvable,broken")
    scenario = _eval(
        root / "scenario", "--policy", "greedy-revise", "--hidden-slots", "5", "--decoy-budgets", "0",
        "--scenario", "2", "--feedback-rounds", "2",
    )  # fmt: skip
    scripted = list(read_records(rounds / EPISODES_FILE))
    llm = llm_run(root / "llm")
    qa_specs_ = qa_specs({"fmt": "concise"}, question_types=QUESTION_TYPES[:3], buckets=[6000], samples=1)
    qa = [*run_qa_episodes(qa_specs_, OracleEngine(qa_specs_)), *run_qa_episodes(qa_specs_, NonsenseEngine())]
    puzzle = {  # no command writes ALB-Puzzle runs: a record of the fields its env reports
        "key": "p",
        "policy": "x",
        "domain": "puzzle",
        "question_type": "puzzle",
        "score": 0.0,
        "env_id": "ALB-Puzzle-v0",
    }
    alb = _write_records(root / "alb", [*qa, puzzle])
    hostile = copy.deepcopy(scripted[0])
    hostile.update(key=PAYLOAD, instance_id=PAYLOAD, domain=PAYLOAD)
    assistant = next(m for m in hostile["messages"] if m["role"] == "assistant")
    assistant["content"] = PAYLOAD
    assistant["tool_calls"][0]["function"]["arguments"] = json.dumps({"row": PAYLOAD, "col": "</script>" + PAYLOAD})
    xss = _write_records(root / "xss", [hostile])
    many = copy.deepcopy(scripted[0])
    paged = _write_records(root / "paged", [{**many, "key": f"k{i}", "score": (i % 4) / 4} for i in range(250)])
    for folder in (rounds, planning, scenario, llm, alb, xss, paged):
        write_view(folder)
    return {
        "rounds": rounds,
        "planning": planning,
        "scenario": scenario,
        "llm": llm,
        "alb": alb,
        "xss": xss,
        "paged": paged,
    }


@pytest.fixture(scope="module")
def browser():
    with headless_chromium() as driver:
        yield driver


def _open(browser: Any, folder: Path) -> None:
    browser.get((folder / "view.html").as_uri())
    browser.find_element("id", "episodes")


def _open_episode(browser: Any, row: int) -> Any:
    browser.find_elements("css selector", "tr.episode")[row].click()
    return browser.find_element("id", "episode-view")


# The builder, in Python.


def test_script_json_cannot_close_its_element_and_reads_back_the_same() -> None:
    value = {"t": "</script><!-- \u2028\u2029 & \udc80 ünï", "n": [1, 2.5, None]}
    text = script_json(value)
    assert not re.search(r"[<>&\u2028\u2029]", text) and text.isascii()
    assert json.loads(text) == value


def test_displayable_clips_huge_strings_and_names_non_finite_numbers() -> None:
    value = displayable({"x" * (MAX_TEXT_CHARS + 5): ["y" * (MAX_TEXT_CHARS + 10), float("nan"), float("-inf")]})
    (key,) = value
    assert key.endswith("[5 more characters not shown]")
    assert value[key][0].endswith("[10 more characters not shown]") and value[key][1:] == ["nan", "-inf"]


def test_row_counts_failures_recoveries_parse_errors_and_attempts(runs: dict[str, Path]) -> None:
    records = list(read_records(runs["llm"] / EPISODES_FILE))
    rows = [episode_row(record, i) for i, record in enumerate(records)]
    assert sum(row["injected"] for row in rows) == sum(len(record["failures"]) for record in records) > 0
    assert all(
        row["recovered"] == sum(f["recovered"] for f in r["failures"]) for row, r in zip(rows, records, strict=True)
    )
    assert all(
        row["parse_errors"] == sum(len(t["info"]["parse_errors"]) for t in r["turns"]) > 0
        and row["attempts"] == r["feedback_rounds"]["attempts_used"]
        for row, r in zip(rows, records, strict=True)
    )
    assert [row["turns"] for row in rows] == [len(r["turns"]) for r in records]


def test_a_record_without_the_optional_fields_gets_a_row_of_nones() -> None:
    row = episode_row({"key": "k", "policy": "p", "domain": "d", "score": None, "question_type": "q"}, 0)
    assert row["H"] is None and row["turns"] is None and row["attempts"] is None and row["instance"] == "q"


def test_page_embeds_no_record_text_as_markup(runs: dict[str, Path]) -> None:
    page = (runs["xss"] / "view.html").read_text(encoding="ascii")
    assert "window.__pwned" in page  # the payload is there, as JSON text
    assert (
        "<script>window" not in page and "<img" not in page and page.count("<script") == 6
    )  # 1 episode and its grids + run, rows, tools, code


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b"{not json\n", "not JSON"),
        (b"\xff\xfe{}\n", "not JSON"),
        (b'{"a":' + b"[" * 200 + b"]" * 200 + b"}\n", "nested"),
        (b'{"key": "k"}\n', "'policy' is missing"),
    ],
)
def test_malformed_lines_are_refused_as_replay_refuses_them(tmp_path: Path, line: bytes, problem: str, capsys) -> None:
    good = encode_json(_alb_record("a")) + b"\n"
    (tmp_path / EPISODES_FILE).write_bytes(good + line + good.replace(b'"a"', b'"b"'))
    with pytest.raises(MalformedRecordsError, match=problem):
        write_view(tmp_path)
    assert not (tmp_path / "view.html").exists()
    assert main(["view", str(tmp_path)]) == EXIT_MALFORMED
    assert main(["view", str(tmp_path), "--skip-malformed", "--out", str(tmp_path / "v.html")]) == 0
    page = (tmp_path / "v.html").read_text(encoding="ascii")
    assert 'id="ep-1"' in page and 'id="ep-2"' not in page and "left out malformed line(s) 2" in page


def test_duplicates_and_a_torn_last_line_are_left_out_with_a_note(tmp_path: Path, capsys) -> None:
    good = encode_json(_alb_record("a")) + b"\n"
    (tmp_path / EPISODES_FILE).write_bytes(good + good + b'{"key": "torn')
    assert write_view(tmp_path).episodes == 1
    assert "whose key an earlier line has (lines 2)" in (tmp_path / "view.html").read_text(encoding="ascii")


def test_a_directory_without_episodes_is_a_config_error(tmp_path: Path, capsys) -> None:
    assert main(["view", str(tmp_path)]) == EXIT_CONFIG
    assert "holds no episodes.jsonl" in capsys.readouterr().err


def test_an_unreadable_summary_is_left_out_with_a_note(tmp_path: Path) -> None:
    _write_records(tmp_path, [_alb_record("a")])
    (tmp_path / "summary.json").write_bytes(b"{broken")
    write_view(tmp_path)
    assert "summary.json was not shown" in (tmp_path / "view.html").read_text(encoding="ascii")


# The page, in a browser.


def test_episode_page_shows_turns_failures_rounds_and_context(
    runs: dict[str, Path], browser: Any, tmp_path: Path
) -> None:
    records = list(read_records(runs["llm"] / EPISODES_FILE))
    _open(browser, runs["llm"])
    assert browser.find_element("id", "page-info").text == f"page 1 of 1 ({len(records)} of {len(records)} episodes)"
    assert "By tool-failure rate" in browser.find_element("id", "run-view").text
    index = max(range(len(records)), key=lambda i: len(records[i]["failures"]))
    record = records[index]
    view = _open_episode(browser, index)
    turns = view.find_elements("css selector", "#turns .msg.assistant")
    assert len(turns) == sum(m["role"] == "assistant" for m in record["messages"]) == len(record["turns"])
    assert len(view.find_elements("css selector", ".msg.tool.failed")) >= len(record["failures"]) > 0
    assert view.text.count("injected failure: ") == len(record["failures"])
    recovered = {
        int(n) for badge in view.find_elements("css selector", ".badge.good") for n in re.findall(r"#(\d+)", badge.text)
    }
    assert recovered == {f["id"] for f in record["failures"] if f["recovered"]}
    for text in (
        "Final grid",
        "Feedback rounds",
        "Injected failures",
        "1 parse error(s)",
        "context window shown to the model",
        "reasoning",
    ):
        assert text in view.text
    assert record["messages"][1]["content"][:40] in view.text  # the task
    view.find_element("css selector", "details summary").click()  # unfold the system prompt
    assert record["messages"][0]["content"][:40] in view.text
    browser.save_screenshot(str(tmp_path / "episode.png"))
    assert (tmp_path / "episode.png").stat().st_size > 10_000
    browser.find_element("id", "back").click()
    assert browser.find_element("id", "list-view").is_displayed()
    assert console_errors(browser) == []


def test_run_summary_list_sorting_filtering_and_paging(runs: dict[str, Path], browser: Any) -> None:
    _open(browser, runs["rounds"])
    run_text = browser.find_element("id", "run-view").text
    assert "By tool-failure rate" in run_text and "score by hidden slots (H) and decoy budget (B)" in run_text
    _open(browser, runs["paged"])
    assert browser.find_element("id", "page-info").text == "page 1 of 3 (250 of 250 episodes)"
    score_header = next(th for th in browser.find_elements("css selector", "th.sortable") if th.text == "score")
    score_header.click()
    score_header = next(
        th for th in browser.find_elements("css selector", "th.sortable") if th.text.startswith("score")
    )
    score_header.click()  # descending
    assert browser.find_elements("css selector", "tr.episode td")[6].text == "0.750"
    browser.find_element("xpath", "//button[text()='next']").click()
    assert browser.find_element("id", "page-info").text.startswith("page 2 of 3")
    browser.find_element("css selector", "#filter-outcome option[value='solved']").click()
    assert browser.find_element("id", "page-info").text == "page 1 of 1 (0 of 250 episodes)"
    browser.find_element("css selector", "#filter-outcome option[value='unsolved']").click()
    search = browser.find_element("id", "filter-text")
    search.send_keys("k24\n")
    assert browser.find_element("id", "page-info").text == "page 1 of 1 (11 of 250 episodes)"
    assert console_errors(browser) == []


@pytest.mark.parametrize("run", ["planning", "alb", "rounds", "scenario"])  # llm: both episodes opened below
def test_every_episode_of_every_family_opens_without_an_error(runs: dict[str, Path], browser: Any, run: str) -> None:
    records = list(read_records(runs[run] / EPISODES_FILE))
    for row, record in enumerate(records):
        _open(browser, runs[run])
        view = _open_episode(browser, row)
        assert view.is_displayed() and f"Episode {row + 1}" in view.text
        planning_verdicts = sum("apb" in call for turn in record.get("turns", []) for call in turn["info"]["calls"])
        assert len(re.findall(r"^apb$", view.text, re.MULTILINE)) == planning_verdicts  # plans, refusals, reason codes
    assert console_errors(browser) == []


def test_alb_page_shows_question_answer_and_gold(runs: dict[str, Path], browser: Any) -> None:
    records = list(read_records(runs["alb"] / EPISODES_FILE))
    for row, record in enumerate(records):
        if record["question_type"] == "puzzle":
            continue
        _open(browser, runs["alb"])
        view = _open_episode(browser, row)
        for text in ("gold answer", "answer", record["question_type"], record["raw_response"], "Raw response"):
            assert text in view.text
        assert record["messages"][1]["content"][-60:].strip() in view.text  # the question
        assert not view.find_elements("css selector", ".turn-grid, #final-grid")  # no grid, no note
        assert "grid" not in view.find_element("id", "turns").text
    assert console_errors(browser) == []


def test_html_and_script_in_records_stay_text(runs: dict[str, Path], browser: Any) -> None:
    _open(browser, runs["xss"])
    view = _open_episode(browser, 0)
    assert browser.execute_script("return window.__pwned") is None  # no payload ran
    browser.find_element("id", "back").click()
    assert PAYLOAD in browser.find_element("id", "episodes").text  # instance name and domain, as text
    view = _open_episode(browser, 0)
    assert view.text.count(PAYLOAD) >= 3  # key, instance, assistant message (the tool argument is JSON-quoted)
    assert "</script>" in view.text
    assert browser.execute_script("return window.__pwned") is None
    assert browser.find_elements("css selector", "main img, main script") == []
    assert console_errors(browser) == []


# The grid after each turn.


def _compiled(record: dict[str, Any]) -> Any:
    return resolve_dataset(record["dataset"], record["domain"]).compiled(record["instance_index"])


@pytest.mark.parametrize("run", ["llm", "rounds", "scenario", "planning"])
def test_grids_replay_every_turn_and_end_on_the_recorded_grid(runs: dict[str, Path], run: str) -> None:
    records = list(read_records(runs[run] / EPISODES_FILE))
    with TurnGrids() as turn_grids:
        for record in records:
            grids = turn_grids.of(record)
            assert grids is not None and grids["note"] is None
            steps = grids["steps"]
            assert len(steps) == len(record["turns"]) + 1 and steps[0] is not None
            last = next(step for step in reversed(steps) if step is not None)
            assert last["grid"] == record["grid"]
            compiled = _compiled(record)
            if not record["settings"]:  # the planning settings may serve a variant of the instance
                assert sorted(grids["hidden"]) == sorted([s.row, s.col] for s in compiled.slots)
                assert grids["truth"] == {
                    f"{s.row},{s.col}": compiled.item_ids[compiled.truth[s.cell]] for s in compiled.slots
                }
                breaking = [
                    [s.row, s.col]
                    for s in compiled.slots
                    if record["grid"][s.row][s.col] is not None
                    and compiled.item_index[record["grid"][s.row][s.col]] not in s.valid_items
                ]
                assert last["breaks"] == breaking


def test_grids_mark_the_slot_a_turn_broke_until_a_later_turn_mends_it(runs: dict[str, Path]) -> None:
    records = list(read_records(runs["llm"] / EPISODES_FILE))
    with TurnGrids() as turn_grids:
        for record in records:
            steps = turn_grids.of(record)["steps"]
            broken = [turn for turn, step in enumerate(steps) if step is not None and step["breaks"]]
            assert broken and record["score"] == 1.0  # FlawedSolverChat sets a slot-breaking candidate once
            (row, col), compiled = steps[broken[0]]["breaks"][0], _compiled(record)
            call = json.loads(record["turns"][broken[0] - 1]["action"].split("<tool_call>")[1].split("</tool_call>")[0])
            assert call["name"] == "set_slot" and (call["arguments"]["row"], call["arguments"]["col"]) == (row, col)
            slot = next(s for s in compiled.slots if (s.row, s.col) == (row, col))
            assert compiled.item_index[call["arguments"]["id"]] not in slot.valid_items
            assert not steps[-1] or not steps[-1]["breaks"]


def _corrupt(record: dict[str, Any], change: str) -> dict[str, Any]:
    record = copy.deepcopy(record)
    spec = record["replay"]["spec"]
    if change == "dataset path":
        spec["stack"]["env_kwargs"]["dataset"] = "/etc/passwd"
    elif change == "dataset changed":
        record["replay"]["dataset_sha256"] = "0" * 64
    elif change == "no replay fields":
        del record["replay"]
    elif change == "unknown instance":
        spec["instance_id"] = "<img src=x onerror=alert(1)>"
    elif change == "unknown env argument":
        spec["stack"]["env_kwargs"]["bogus"] = 1
    elif change == "unknown spec field":
        spec["bogus"] = 1
    elif change == "edited action":
        record["turns"][2]["action"] = "<tool_call>not json</tool_call>"
    elif change == "edited opening":
        record["messages"][1]["content"] = "another task"
    return record


CORRUPTIONS = {
    "dataset path": "the dataset '/etc/passwd' is not bundled",
    "dataset changed": "dataset_sha256 is not what the record was played on",
    "no replay fields": "carries no replay fields",
    "unknown instance": "not in",
    "unknown env argument": "unexpected keyword argument 'bogus'",
    "unknown spec field": "unknown fields",
    "edited action": "stops before turn 3",
    "edited opening": "stops before the opening",
}


@pytest.mark.parametrize("change", CORRUPTIONS)
def test_a_record_that_cannot_be_replayed_gets_a_note_never_an_error(runs: dict[str, Path], change: str) -> None:
    record = _corrupt(next(iter(read_records(runs["rounds"] / EPISODES_FILE))), change)
    with TurnGrids() as turn_grids:
        grids = turn_grids.of(record)
    assert CORRUPTIONS[change] in grids["note"]
    assert len(grids["steps"]) == (3 if change == "edited action" else 0)


def test_no_grids_leaves_the_grids_out(runs: dict[str, Path], tmp_path: Path) -> None:
    assert main(["view", str(runs["rounds"]), "--no-grids", "--out", str(tmp_path / "v.html")]) == 0
    page = (tmp_path / "v.html").read_text(encoding="ascii")
    assert 'id="ep-0"' in page and 'id="grids-' not in page
    assert 'id="grids-0"' in (runs["rounds"] / "view.html").read_text(encoding="ascii")


def test_an_alb_record_has_no_grids(runs: dict[str, Path]) -> None:
    with TurnGrids() as turn_grids:
        assert all(turn_grids.of(record) is None for record in read_records(runs["alb"] / EPISODES_FILE))


def test_episode_page_shows_the_grid_after_each_turn_with_its_marks(
    runs: dict[str, Path], browser: Any, tmp_path: Path
) -> None:
    records = list(read_records(runs["llm"] / EPISODES_FILE))
    _open(browser, runs["llm"])
    view = _open_episode(browser, 0)
    record = records[0]
    grids = view.find_elements("css selector", "#turns .turn-grid")
    assert len(grids) == len(record["turns"])
    assert [g.find_element("tag name", "summary").text.split(" (")[0].split(",")[0] for g in grids] == [
        f"grid after turn {turn}" for turn in range(1, len(record["turns"]) + 1)
    ]
    broken = [g for g in grids if g.find_elements("css selector", "td.breaks")]
    assert len(broken) >= 1 and broken[0].get_attribute("open") == "true"  # the turn that broke it changed the grid
    assert "1 breaks a slot rule (red)" in broken[0].text
    final = view.find_element("id", "final-grid")
    assert len(final.find_elements("css selector", "td.truth")) == record["hidden_slots"]  # solved: all the truth
    assert f"{record['hidden_slots']} of {record['hidden_slots']} hold the truth" in final.text
    browser.save_screenshot(str(tmp_path / "grids.png"))
    assert console_errors(browser) == []
    folder = _write_records(tmp_path / "noted", [_corrupt(records[0], "dataset changed")])
    write_view(folder)
    _open(browser, folder)
    view = _open_episode(browser, 0)
    assert CORRUPTIONS["dataset changed"] in view.find_element("id", "turns").text
    assert not view.find_elements("css selector", ".turn-grid") and "Final grid" in view.text
    assert console_errors(browser) == []
