"""``ace-gym eval`` / ``ace-gym report`` end to end: outputs, resume after SIGKILL, report rebuild,
and every way a user's run can go wrong: one clear line on stderr, a documented exit code, nothing
already written lost."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

import pytest

import ace_gym.agents
from ace_gym.cli import main
from ace_gym.exit_codes import EXIT_CONFIG, EXIT_ENGINE, EXIT_IN_USE, EXIT_INTERRUPTED, EXIT_IO, EXIT_MALFORMED
from ace_gym.runs.results import read_records
from tests.core_helpers import killed_writer
from tests.missing_modules import without_modules

SLICE = ["--domains", "course,travel", "--hidden-slots", "1,5", "--decoy-budgets", "0,4"]  # 2 domains x 4 instances
MEAL = ["--domains", "meal", "--hidden-slots", "1", "--decoy-budgets", "0"]  # one instance


def run_cli(*args: str) -> int:
    """``ace-gym eval`` in this process; an exception or Ctrl-C escaping ``main`` fails the test."""
    try:
        return main(["eval", "--no-progress", *args])
    except KeyboardInterrupt:  # would otherwise stop the whole pytest session
        pytest.fail("KeyboardInterrupt escaped ace-gym eval")


def one_error_line(capsys: pytest.CaptureFixture) -> str:
    """stderr of the last command: exactly one non-empty line, no traceback."""
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in lines[0], lines
    return lines[0]


def hidden_files(directory: Path) -> list[str]:
    """Names of dot files: leftover temp files, or the episode file's lock after the eval closed it."""
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def test_eval__writes_records_summary_heatmaps_and_prints_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "run"
    assert (
        run_cli("--policy", "solver", "--out", str(out), *SLICE, "--trials", "2", "--tool-failure-rates", "0,0.1") == 0
    )
    records = list(read_records(out / "episodes.jsonl"))
    assert len(records) == 2 * 4 * 2 * 2 and all(r["score"] == 1.0 for r in records)
    assert len({r["key"] for r in records}) == len(records)
    assert {(r["hidden_slots"], r["decoy_budget"]) for r in records} == {(1, 0), (1, 4), (5, 0), (5, 4)}
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) >= {"run", "overall", "per_domain", "cells", "cells_by_failure_rate"}
    assert summary["run"]["dataset"] == "5x5" and summary["run"]["ace_gym_version"] == ace_gym.__version__
    assert summary["run"]["settings"]["seed"] == 0 and summary["run"]["settings"]["max_turns"] is None
    assert summary["overall"]["score"] == 1.0 and set(summary["per_domain"]) == {"course", "travel"}
    assert len(summary["cells"]) == 8 and all(c["episodes"] == 4 for c in summary["cells"])
    assert set(summary["per_failure_rate"]) == {"0", "0.1"}
    assert sorted(p.name for p in out.glob("heatmap_*")) == sorted(
        f"heatmap_{domain}_failure{rate}.png" for domain in ("course", "travel") for rate in ("0", "0.1")
    )
    assert hidden_files(out) == []
    printed = capsys.readouterr().out
    assert "policy: solver" in printed and "average" in printed and "course" in printed
    assert "1.000 ±0.000" in printed and "standard error" in printed


def test_eval__rerun_skips_finished_episodes(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "run"
    assert run_cli("--policy", "greedy", "--out", str(out), *SLICE) == 0
    first = (out / "episodes.jsonl").read_bytes()
    assert run_cli("--policy", "greedy", "--out", str(out), *SLICE) == 0
    assert (out / "episodes.jsonl").read_bytes() == first
    assert "resuming: 8 of 8 episodes" in capsys.readouterr().err


def test_eval__reads_a_folder_of_generated_dataset_files(tmp_path: Path) -> None:
    from ace_gym.generators import dataset_file_name, generate_dataset

    for domain in ("shopping", "workforce"):
        name = dataset_file_name(domain, 4, 6, [3, 8], [0, 6], 25, 5)
        generate_dataset(
            domain, rows=4, cols=6, hidden_slots=[3, 8], decoy_budgets=[0, 6], seed=5, path=tmp_path / name
        )
    out = tmp_path / "run"
    assert (
        run_cli("--policy", "solver", "--dataset", str(tmp_path), "--domains", "shopping,workforce", "--out", str(out))
        == 0
    )
    records = list(read_records(out / "episodes.jsonl"))
    assert len(records) == 8 and all(r["score"] == 1.0 for r in records)
    assert {r["dataset"] for r in records} == {str(p.resolve()) for p in tmp_path.glob("*_dataset_*")}


def test_eval__a_folder_of_some_domains_files_runs_the_domains_it_holds_by_default(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from ace_gym.generators import dataset_file_name, generate_dataset

    data = tmp_path / "data"
    for domain in ("shopping", "workforce"):
        name = dataset_file_name(domain, 4, 6, [3], [0], 25, 5)
        generate_dataset(domain, rows=4, cols=6, hidden_slots=[3], decoy_budgets=[0], seed=5, path=data / name)
    assert run_cli("--policy", "solver", "--dataset", str(data), "--out", str(tmp_path / "run")) == 0
    assert {r["domain"] for r in read_records(tmp_path / "run" / "episodes.jsonl")} == {"shopping", "workforce"}
    capsys.readouterr()
    assert run_cli("--policy", "solver", "--dataset", str(data), "--domains", "meal", "--out", str(tmp_path / "m")) == 2
    assert "needs exactly one meal_dataset_* file, found 0" in one_error_line(capsys)
    (tmp_path / "empty").mkdir()
    assert run_cli("--policy", "solver", "--dataset", str(tmp_path / "empty"), "--out", str(tmp_path / "e")) == 2
    assert "holds no <domain>_dataset_* file" in one_error_line(capsys)


def test_eval__refuses_to_mix_policies_or_budgets_in_one_directory(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert run_cli("--policy", "greedy", "--out", str(out), *MEAL) == 0
    assert run_cli("--policy", "solver", "--out", str(out), *MEAL) == 2
    assert run_cli("--policy", "greedy", "--out", str(out), *MEAL, "--extra-query-num", "0") == 2


@pytest.mark.parametrize(
    ("change", "difference"),
    [
        (["--dataset", "5x7"], "dataset '5x5' (this eval: '5x7')"),
        (["--max-turns", "50"], "max_turns None (this eval: 50)"),
        (["--seed", "3"], "seed 0 (this eval: 3)"),
        (["--global-check-alpha", "1"], "global_check_alpha -1 (this eval: 1.0)"),
    ],
)
def test_eval__refuses_another_dataset_or_settings_saying_what_differs(
    tmp_path: Path, capsys: pytest.CaptureFixture, change: list[str], difference: str
) -> None:
    out = tmp_path / "run"
    slice_5x7 = ["--domains", "meal", "--hidden-slots", "1", "--decoy-budgets", "0"]  # in both 5x5 and 5x7
    assert run_cli("--policy", "solver", "--out", str(out), *slice_5x7) == 0
    before = (out / "episodes.jsonl").read_bytes()
    capsys.readouterr()
    assert run_cli("--policy", "solver", "--out", str(out), *slice_5x7, *change) == EXIT_CONFIG
    assert difference in one_error_line(capsys)
    assert (out / "episodes.jsonl").read_bytes() == before


def test_eval__refuses_a_run_of_another_ace_gym_version_and_accepts_more_episodes_of_the_same_run(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "run"
    assert run_cli("--policy", "solver", "--out", str(out), *MEAL) == 0
    # the same run may grow: other domains, filters, failure rates and trials add episodes
    assert run_cli("--policy", "solver", "--out", str(out), *SLICE, "--trials", "2") == 0
    assert json.loads((out / "summary.json").read_text())["episodes"] == 1 + 16
    summary = json.loads((out / "summary.json").read_text())
    summary["run"]["ace_gym_version"] = "0.0.1"
    (out / "summary.json").write_text(json.dumps(summary))
    capsys.readouterr()
    assert run_cli("--policy", "solver", "--out", str(out), *MEAL) == EXIT_CONFIG
    assert f"ace_gym_version '0.0.1' (this eval: '{ace_gym.__version__}')" in one_error_line(capsys)


def test_eval__out_naming_a_file_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("mine")
    assert run_cli("--policy", "solver", "--out", str(target), *MEAL) == EXIT_CONFIG
    assert "is not a directory" in one_error_line(capsys)
    assert target.read_text() == "mine"


def test_eval__unwritable_out_dir_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "run"
    out.mkdir()
    real_open = os.open

    def read_only_open(path: object, flags: int, *args: object, **kwargs: object) -> int:
        if Path(os.fsdecode(path)).parent == out and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fsdecode(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only_open)  # as a read-only directory answers (root ignores chmod)
    assert run_cli("--policy", "solver", "--out", str(out), *MEAL) == EXIT_IO
    line = one_error_line(capsys)
    assert "Permission denied" in line and str(out) in line
    assert list(out.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_eval__read_only_out_dir_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "run"
    out.mkdir()
    out.chmod(0o555)
    try:
        assert run_cli("--policy", "solver", "--out", str(out), *MEAL) == EXIT_IO
        assert "Permission denied" in one_error_line(capsys)
    finally:
        out.chmod(0o755)


def read_only_file_system(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """Make writes into ``folder`` fail as on a read-only file system (root ignores chmod)."""
    real_open, real_mkstemp = os.open, tempfile.mkstemp

    def refuse(path: object) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fsdecode(path))  # type: ignore[arg-type]

    def read_only_open(path: object, flags: int, *args: object, **kwargs: object) -> int:
        if Path(os.fsdecode(path)).parent == folder and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):  # type: ignore[arg-type]
            refuse(path)
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    def read_only_mkstemp(**kwargs: Any) -> tuple[int, str]:
        if Path(kwargs["dir"]) == folder:
            refuse(folder / "tmp")
        return real_mkstemp(**kwargs)

    monkeypatch.setattr(os, "open", read_only_open)
    monkeypatch.setattr(tempfile, "mkstemp", read_only_mkstemp)


def test_eval_and_report__a_read_only_file_system_says_what_can_help_not_to_re_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "run"
    assert run_cli("--policy", "solver", "--out", str(out), *MEAL) == 0
    capsys.readouterr()
    read_only_file_system(monkeypatch, out)
    assert main(["report", str(out)]) == EXIT_IO
    line = one_error_line(capsys)
    assert "Read-only file system; re-running will not help: make the run folder writable" in line
    assert "re-run the same command" not in line
    assert run_cli("--policy", "solver", "--out", str(out), *MEAL) == EXIT_IO
    line = one_error_line(capsys)
    assert "Read-only file system; re-running will not help: choose a writable --out folder" in line


def test_report_and_resume__remove_the_temporary_heatmap_files_a_killed_report_left(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "run"
    assert run_cli("--policy", "solver", "--out", str(out), *MEAL) == 0
    killed_writer(out / "heatmap_meal_failure0.0.pdf")  # a report killed while writing a heatmap
    killed_writer(out / "summary.json")
    assert len(hidden_files(out)) == 2
    assert main(["report", str(out)]) == 0
    assert hidden_files(out) == []
    killed_writer(out / "heatmap_meal_failure0.0.svg")
    assert run_cli("--policy", "solver", "--out", str(out), *MEAL) == 0  # the resume of the killed eval
    assert hidden_files(out) == []


@pytest.mark.parametrize(
    ("command", "fifo"),
    [(command, "episodes.jsonl") for command in ("replay", "export", "report", "eval")]
    + [(command, "summary.json") for command in ("report", "eval")],
)
def test_commands__an_episode_file_or_summary_that_is_a_fifo_is_refused_in_one_line_not_waited_on(
    tmp_path: Path, command: str, fifo: str
) -> None:
    out = tmp_path / "run"
    if fifo == "summary.json":  # a finished run, its summary swapped for a FIFO
        assert run_cli("--policy", "solver", "--out", str(out), *MEAL) == 0
        (out / fifo).unlink()
    else:
        out.mkdir()
    os.mkfifo(out / fifo)
    argv = [command, str(out)] if command != "eval" else ["eval", "--policy", "solver", *MEAL, "--out", str(out)]
    try:
        finished = subprocess.run(  # a bound for the old behaviour (waiting forever), not a timing
            [sys.executable, "-m", "ace_gym", *argv], capture_output=True, text=True, timeout=120, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"ace-gym {command} waited on a FIFO")
    assert finished.returncode == EXIT_IO
    assert finished.stderr.strip() == f"ace-gym {command}: {out / fifo}: is a FIFO, not a regular file"


@pytest.mark.parametrize("episodes", ["fifo", "records"])
def test_export__without_datasets_a_fifo_is_refused_first_and_records_name_the_extra(
    tmp_path: Path, episodes: str
) -> None:
    out = tmp_path / "run"
    if episodes == "fifo":
        out.mkdir()
        os.mkfifo(out / "episodes.jsonl")
    else:
        assert run_cli("--policy", "solver", "--out", str(out), *MEAL) == 0
    script = without_modules(["datasets"]) + f"from ace_gym.cli import main\nsys.exit(main(['export', {str(out)!r}]))"
    try:
        finished = subprocess.run(  # a bound for waiting on the FIFO, not a timing
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.fail("ace-gym export waited on a FIFO")
    if episodes == "fifo":
        assert finished.returncode == EXIT_IO
        assert finished.stderr.strip() == f"ace-gym export: {out / 'episodes.jsonl'}: is a FIFO, not a regular file"
    else:
        assert finished.returncode == EXIT_CONFIG
        assert "needs the datasets library: pip install '.[export]'" in finished.stderr


def test_eval__full_disk_keeps_whole_records_says_so_and_the_rerun_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "run"
    real_write = os.write
    appended = []

    def filling_write(fd: int, data: bytes) -> int:
        if bytes(data).startswith(b'{"key"'):
            appended.append(fd)
            if len(appended) == 3:  # the disk fills up in the middle of the third record
                real_write(fd, bytes(data)[: len(data) // 2])
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", filling_write)
    assert run_cli("--policy", "solver", "--out", str(out), *SLICE) == EXIT_IO
    line = one_error_line(capsys)
    assert "No space left on device" in line and "re-run the same command to resume" in line
    lines = (out / "episodes.jsonl").read_bytes().splitlines(keepends=True)
    assert len(lines) == 2 and all(line.endswith(b"\n") for line in lines)  # the torn third was undone
    monkeypatch.setattr(os, "write", real_write)
    assert run_cli("--policy", "solver", "--out", str(out), *SLICE) == 0
    assert "resuming: 2 of 8 episodes" in capsys.readouterr().err
    assert len({r["key"] for r in read_records(out / "episodes.jsonl")}) == 8


def test_report__full_disk_while_writing_keeps_the_old_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "run"
    assert run_cli("--policy", "solver", "--out", str(out), *MEAL) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()

    def full_replace(source: object, target: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.fsdecode(target))

    monkeypatch.setattr(os, "replace", full_replace)
    assert main(["report", str(out)]) == EXIT_IO
    assert "summary.json: No space left on device" in one_error_line(capsys)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no temp file left, nothing changed


def test_eval__ctrl_c_while_the_report_is_written_exits_130_and_leaves_no_temp_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from matplotlib.figure import Figure

    out = tmp_path / "run"
    real_savefig = Figure.savefig
    calls = []

    def interrupted_savefig(self: Figure, *args: object, **kwargs: object) -> None:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        real_savefig(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", interrupted_savefig)
    assert run_cli("--policy", "solver", "--out", str(out), *SLICE) == EXIT_INTERRUPTED
    assert "interrupted" in one_error_line(capsys)
    assert hidden_files(out) == []
    assert len(list(read_records(out / "episodes.jsonl"))) == 8
    monkeypatch.setattr(Figure, "savefig", real_savefig)
    assert main(["report", str(out)]) == 0
    assert len(list(out.glob("heatmap_*.png"))) == 2


def test_eval__filter_selecting_no_episode_is_an_error_naming_the_values_that_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert run_cli("--policy", "solver", "--out", str(tmp_path / "run"), "--hidden-slots", "2") == EXIT_CONFIG
    line = one_error_line(capsys)
    assert "hidden slots 1, 5, 7, 11, 15" in line and "decoy budgets 0, 2, 4" in line
    assert run_cli("--policy", "solver", "--out", str(tmp_path / "run"), "--decoy-budgets", "3,4") == EXIT_CONFIG
    assert "3 selects no episode" in one_error_line(capsys)
    assert not (tmp_path / "run").exists()


def _append_lines(path: Path, *lines: bytes) -> None:
    with path.open("ab") as handle:
        handle.write(b"".join(lines))


def test_report__malformed_lines_are_named_and_refused_or_skipped_on_request(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "run"
    assert run_cli("--policy", "solver", "--out", str(out), *SLICE) == 0
    log = out / "episodes.jsonl"
    first = json.loads(log.read_bytes().splitlines()[0])
    _append_lines(log, b"not json\n", b'{"key": "x"}\n', json.dumps({**first, "key": "extra"}).encode() + b"\n")
    episodes, summary = log.read_bytes(), (out / "summary.json").read_bytes()
    capsys.readouterr()

    assert main(["report", str(out)]) == EXIT_MALFORMED
    line = one_error_line(capsys)
    assert "2 malformed line(s)" in line and "line 9: not JSON" in line and "line 10: 'policy' is missing" in line
    assert (out / "summary.json").read_bytes() == summary and log.read_bytes() == episodes
    assert run_cli("--policy", "solver", "--out", str(out), *SLICE) == EXIT_MALFORMED
    capsys.readouterr()

    assert main(["report", str(out), "--skip-malformed"]) == 0
    rebuilt = json.loads((out / "summary.json").read_text())
    assert rebuilt["skipped_lines"] == [9, 10] and rebuilt["episodes"] == 9
    assert "left out malformed lines [9, 10]" in capsys.readouterr().err
    assert run_cli("--policy", "solver", "--out", str(out), *SLICE, "--skip-malformed") == 0
    assert log.read_bytes() == episodes  # never rewritten


def test_eval__a_second_writer_of_the_same_out_is_refused_in_process(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from ace_gym.runs.results import EpisodeLog

    out = tmp_path / "run"
    with EpisodeLog(out / "episodes.jsonl"):
        assert run_cli("--policy", "solver", "--out", str(out), *MEAL) == EXIT_IN_USE
        assert f"in use by pid {os.getpid()}" in one_error_line(capsys)
    assert run_cli("--policy", "solver", "--out", str(out), *MEAL) == 0


def test_eval__progress_bar_counts_episodes_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["eval", "--policy", "solver", "--out", str(tmp_path / "run"), *SLICE]) == 0
    err = capsys.readouterr().err
    assert "eval" in err and "8/8" in err and "score 1.000" in err
    assert f"writing heatmaps (png) into {tmp_path / 'run'}" in err  # the last step says what it does


def test_report__heatmaps_are_png_unless_other_formats_are_asked_for_and_stale_ones_go(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "run"
    assert run_cli("--policy", "solver", "--out", str(out), *MEAL, "--heatmap-formats", "png", "pdf", "svg") == 0
    assert sorted(p.name for p in out.glob("heatmap_*")) == [
        f"heatmap_meal_failure0.{f}" for f in ("pdf", "png", "svg")
    ]
    assert main(["report", str(out), "--heatmap-formats", "svg"]) == 0
    assert [p.name for p in out.glob("heatmap_*")] == ["heatmap_meal_failure0.svg"]  # no PNG of older scores
    assert "writing heatmaps (svg)" in capsys.readouterr().err
    assert main(["report", str(out)]) == 0
    assert [p.name for p in out.glob("heatmap_*")] == ["heatmap_meal_failure0.png"]
    with pytest.raises(SystemExit):
        main(["report", str(out), "--heatmap-formats", "jpg"])


@pytest.mark.parametrize("refusal", ["missing extra", "dead endpoint"])
def test_eval__a_run_refused_before_it_stored_an_episode_leaves_its_out_to_the_corrected_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, refusal: str
) -> None:
    out = tmp_path / "run"
    if refusal == "missing extra":
        monkeypatch.setitem(sys.modules, "ace_gym.agents.llm", None)  # import fails as if not installed
        monkeypatch.delattr(ace_gym.agents, "llm", raising=False)
        assert run_cli("--policy", "vllm:/models/tiny", "--out", str(out), *MEAL) == EXIT_CONFIG
    else:
        dead = "openai:m@http://127.0.0.1:9/v1"  # the discard port: nothing listens
        assert run_cli("--policy", dead, "--engine-option", "max_retries=0", "--out", str(out), *MEAL) == EXIT_ENGINE
    capsys.readouterr()
    assert run_cli("--policy", "solver", "--out", str(out), *MEAL) == 0  # was: "holds another run"
    assert [r["policy"] for r in read_records(out / "episodes.jsonl")] == ["solver"]
    assert json.loads((out / "summary.json").read_text())["run"]["policy"] == "solver"
    capsys.readouterr()
    assert run_cli("--policy", "greedy", "--out", str(out), *MEAL) == EXIT_CONFIG  # now it holds a run
    assert "holds another run" in one_error_line(capsys)


def test_eval__unknown_policy_or_domain_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert run_cli("--policy", "solvr", "--out", str(tmp_path / "a")) == 2
    assert "did you mean 'solver'" in capsys.readouterr().err
    assert run_cli("--policy", "solver", "--domains", "cours", "--out", str(tmp_path / "b")) == 2
    assert "did you mean 'course'" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()


def test_eval__engine_options_for_a_scripted_policy_are_refused_not_ignored(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "run"
    assert run_cli("--policy", "solver", "--engine-option", "temperature=0", "--out", str(out), *MEAL) == EXIT_CONFIG
    assert "apply to LLM policies only" in one_error_line(capsys) and not out.exists()


def test_eval__llm_policy_is_built_by_make_engine_with_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from tests.eval.test_rollout import SolverChatEngine

    made = []

    def make_engine(spec: str, **options: object) -> SolverChatEngine:
        made.append((spec, options))
        return SolverChatEngine()

    fake_llm = types.ModuleType("ace_gym.agents.llm")
    fake_llm.make_engine = make_engine  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ace_gym.agents.llm", fake_llm)
    out = tmp_path / "run"
    assert (
        run_cli(
            "--policy",
            "openai:tiny@http://localhost:1",
            "--out",
            str(out),
            *SLICE,
            "--engine-option",
            "temperature=0.5",
        )
        == 0
    )
    assert made == [("openai:tiny@http://localhost:1", {"temperature": 0.5})]
    records = list(read_records(out / "episodes.jsonl"))
    assert len(records) == 8 and all(r["score"] == 1.0 for r in records)
    assert all(r["usage"]["completion_tokens"] > 0 for r in records)
    assert json.loads((out / "summary.json").read_text())["overall"]["tokens"] > 0
    # re-running a finished evaluation rebuilds the report without loading the model again
    assert (
        run_cli(
            "--policy",
            "openai:tiny@http://localhost:1",
            "--out",
            str(out),
            *SLICE,
            "--engine-option",
            "temperature=0.5",
        )
        == 0
    )
    assert len(made) == 1


def test_eval__llm_policy_without_the_llm_package_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "ace_gym.agents.llm", None)  # import fails as if not installed
    monkeypatch.delattr(ace_gym.agents, "llm", raising=False)
    assert run_cli("--policy", "vllm:/models/tiny", "--out", str(tmp_path / "run"), *SLICE) == 2
    assert "pip install '.[vllm]' in an ace-gym checkout" in capsys.readouterr().err


def test_report__rebuilds_summary_and_heatmaps_from_the_records(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "run"
    assert run_cli("--policy", "greedy", "--out", str(out), *SLICE) == 0
    summary = json.loads((out / "summary.json").read_text())
    table = capsys.readouterr().out
    heatmaps = {p.name: p.read_bytes() for p in out.glob("heatmap_*")}
    for produced in out.glob("heatmap_*"):
        produced.unlink()
    assert main(["report", str(out)]) == 0
    rebuilt = json.loads((out / "summary.json").read_text())
    assert rebuilt == summary and rebuilt["overall"]["episodes"] == 8 and rebuilt["run"]["policy"] == "greedy"
    assert capsys.readouterr().out == table
    assert {p.name: p.read_bytes() for p in out.glob("heatmap_*")} == heatmaps  # same records, same bytes
    assert main(["report", str(tmp_path / "nothing")]) == EXIT_CONFIG
    assert "holds no episodes.jsonl" in one_error_line(capsys)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "episodes.jsonl").write_bytes(b"")
    assert main(["report", str(tmp_path / "empty")]) == EXIT_CONFIG
    assert "holds no episode records" in one_error_line(capsys)


@pytest.mark.slow
def test_eval__sigkill_mid_run_then_rerun_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    command = [sys.executable, "-m", "ace_gym", "eval", "--policy", "solver", "--domains", "course,meal,travel"]
    command += ["--out", str(out), "--no-progress"]
    log = out / "episodes.jsonl"
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if log.exists() and log.read_bytes().count(b"\n") >= 10:
            break
        time.sleep(0.02)
    assert process.poll() is None, "the eval finished before it could be killed"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL
    survived = log.read_bytes()
    survived = survived[: survived.rfind(b"\n") + 1]  # a torn last line is allowed, nothing else
    kept = [json.loads(line) for line in survived.splitlines()]
    assert 10 <= len(kept) < 105

    rerun = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert rerun.returncode == 0, rerun.stderr
    assert f"resuming: {len(kept)} of 105 episodes" in rerun.stderr
    final = log.read_bytes()
    assert final.startswith(survived) and final.endswith(b"\n")
    records = [json.loads(line) for line in final.splitlines()]
    keys = [r["key"] for r in records]
    assert len(keys) == len(set(keys)) == 105
    assert all(r["score"] == 1.0 for r in records)
    assert json.loads((out / "summary.json").read_text())["episodes"] == 105


WAITING_SOLVER = """
import signal, sys
from ace_gym import policies
from ace_gym.agents.solver import ExactSolver
from ace_gym.cli import main

signal.signal(signal.SIGINT, signal.default_int_handler)  # also when the suite runs where SIGINT is ignored (a background job)

class SolverThatWaitsAfterOneEpisode(ExactSolver):
    started = 0

    def script(self, *args):
        type(self).started += 1
        while type(self).started > 1:
            signal.pause()  # until a signal's handler raises (SIGINT: KeyboardInterrupt)
        return (yield from super().script(*args))

policies.SCRIPTED_POLICIES["solver"] = SolverThatWaitsAfterOneEpisode  # same name, same records
sys.exit(main(sys.argv[1:]))
"""


def _eval_process(out: Path, *, wait_after_one_episode: bool = False) -> subprocess.Popen:
    """``ace-gym eval --policy solver`` on 105 episodes; with ``wait_after_one_episode`` its solver
    writes one episode, then waits (a signal ends the wait) before playing the second, so a signal
    sent once a record is on disk always lands mid-run, however loaded the machine."""
    program = ["-c", WAITING_SOLVER] if wait_after_one_episode else ["-m", "ace_gym"]
    command = [sys.executable, *program, "eval", "--policy", "solver", "--domains", "course,meal,travel"]
    command += ["--batch-size", "1"]  # one episode at a time: a waiting second episode holds no first
    return subprocess.Popen([*command, "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _wait_for_records(process: subprocess.Popen, log: Path, count: int) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if log.exists() and log.read_bytes().count(b"\n") >= count:
            return
        time.sleep(0.02)
    pytest.fail(f"the eval ended (or stalled) before writing {count} records")


@pytest.mark.slow
def test_eval__two_processes_on_one_out_the_second_is_refused_and_nothing_is_duplicated(tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = _eval_process(out, wait_after_one_episode=True)
    _wait_for_records(first, out / "episodes.jsonl", 1)
    second = _eval_process(out)
    _, second_err = second.communicate(timeout=120)
    assert second.returncode == EXIT_IN_USE
    assert f"is in use by pid {first.pid}" in second_err and "Traceback" not in second_err
    first.send_signal(signal.SIGINT)
    _, first_err = first.communicate(timeout=120)
    assert first.returncode == EXIT_INTERRUPTED, first_err
    assert len(list(read_records(out / "episodes.jsonl"))) == 1  # the first one's, once


@pytest.mark.slow
def test_eval__sigint_mid_run_exits_130_with_one_message_then_the_rerun_resumes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    process = _eval_process(out, wait_after_one_episode=True)
    _wait_for_records(process, out / "episodes.jsonl", 1)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == EXIT_INTERRUPTED, err
    assert "interrupted; finished episodes are saved" in err and "Traceback" not in err
    assert len(list(read_records(out / "episodes.jsonl"))) == 1
    rerun = _eval_process(out)
    _, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0 and "resuming: 1 of 105 episodes" in err
    assert len({r["key"] for r in read_records(out / "episodes.jsonl")}) == 105


def test_eval__dataset_name_the_system_refuses_is_a_config_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    code = main(["eval", "--policy", "solver", "--dataset", "d" * 5000, "--out", str(tmp_path / "run")])
    assert code == EXIT_CONFIG
    assert "dataset=" in capsys.readouterr().err
