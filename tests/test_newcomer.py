"""A new user's first hour (issue 29): what they type lands where they meant, or is refused
with the order that works; what the views say reads right."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mpsprofiler import cli
from torch_facts import has_mps_kernel

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "recordings" / "slow_dataloader"


def parse(argv: list[str]):  # type: ignore[no-untyped-def]
    return cli._parse(cli.build_parser(), argv)


def test_torch_facts_read_the_installed_torch() -> None:
    """The helper the readiness tests take their expectations from can say both yes and no."""
    assert has_mps_kernel("mm.out") and not has_mps_kernel("_pdist_forward")


def test_try_options_after_a_run_directory_are_parsed() -> None:
    """`mpsprof try RUN --budget 40 --pairs 3 --steps 20` ran 5 pairs x 30 steps: the
    options after the run directory were taken as script arguments and ignored."""
    args = parse(["try", str(FIXTURE), "--budget", "40", "--pairs", "3", "--steps", "20", "--set", "env.X=1"])
    assert (args.budget, args.pairs, args.steps, args.args) == (40.0, 3, 20, [])
    assert args.settings == ["env.X=1"] and args.target == str(FIXTURE)
    mixed = parse(["try", "--steps", "4", "--set", "env.A=1", str(FIXTURE), "--set", "env.B=2"])
    assert mixed.steps == 4 and mixed.settings == ["env.A=1", "env.B=2"]


@pytest.mark.parametrize("tail", [["--pairs", "3", "foo"], ["--", "--pairs", "3"]])
def test_try_refuses_words_after_a_run_directory(tail: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse(["try", str(FIXTURE), *tail])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "takes no script arguments" in err and f"mpsprof try {FIXTURE} --steps 20" in err, err


def test_try_and_run_say_where_an_mpsprof_option_after_the_script_went(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "train.py"
    script.write_text("pass\n")
    args = parse(["try", "--set", "env.A=1", str(script), "--steps", "3"])
    assert args.args == ["--steps", "3"] and args.steps == 30  # the script's, as python would
    err = capsys.readouterr().err
    assert f"--steps after {script} goes to the script" in err and f"mpsprof try --steps ... {script}" in err
    args = parse(["run", str(script), "--max-steps", "5", "--epochs", "1"])
    assert args.args == ["--max-steps", "5", "--epochs", "1"] and args.max_steps is None
    assert f"mpsprof run --max-steps ... {script}" in args.note  # printed after the run's summary
    assert parse(["run", str(script), "--epochs", "1"]).note == ""  # the script's own options


def test_try_help_says_where_options_go(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(["try", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "with a run directory, anywhere" in out and "mpsprof try mpsprof-runs/<run> --steps 20" in out


@pytest.mark.parametrize(("word", "hint"), [("rnu", "did you mean run?"), ("veiw", "did you mean view?"),
                                            ("train.py", "mpsprof run train.py --lr 1")])
def test_a_mistyped_command_gets_a_suggestion(word: str, hint: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse([word, "--lr", "1"])
    assert exc.value.code == 2 and hint in capsys.readouterr().err


def test_view_and_report_find_the_runs_of_a_project_directory(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    import os

    runs = tmp_path / "mytrain" / "mpsprof-runs"
    old, new = runs / "20260101-old", runs / "20260102-new"
    shutil.copytree(FIXTURE, old)
    shutil.copytree(FIXTURE, new)
    os.utime(old / "events.jsonl", (1, 1))
    assert cli.main(["report", str(tmp_path / "mytrain"), "--format", "json", "-o", str(tmp_path / "r.json")]) == 0
    err = capsys.readouterr().err
    assert f"holds 2 runs: opening the newest, {new}" in err and f"    {old}" in err, err
    from mpsprofiler.cli_args import find_runs

    assert find_runs([runs]) == [new] and find_runs([new]) == [new]
    assert find_runs([tmp_path]) == [tmp_path]  # nothing there: load says what is wrong
