import subprocess
import sys

import pytest

from neurips26.cli import EXIT_OK, EXIT_USAGE, main


def test_list_shows_every_method(capsys) -> None:
    assert main(["list"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "samhybrid" in out and "solexecbench" in out and "planned" in out
    assert len(out.strip().splitlines()) == 19 + 2 + 2  # header, rule, methods, blank, total
    assert "default profile: about" in out


def test_info_shows_defaults_with_sources(capsys) -> None:
    assert main(["info", "samhybrid"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "rho" in out and "SAM paper" in out and "sam_ml (ours)" in out and "smoke:" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "nosuchmethod"], "unknown method 'nosuchmethod'"),
        (["run", "samhybrid", "--set", "bad=1"], "valid keys"),
        (["run", "samhybrid", "--set", "rho=-1"], "rho must be finite and >= 0"),
        (["run", "samhybrid", "--set", "novalue"], "key=value"),
        (["run", "styleroute"], "is planned"),
        (["info", "nosuch"], "unknown method"),
        (["report", "/nonexistent/run"], "not a run folder"),
    ],
)
def test_usage_errors_are_one_line_with_exit_2(argv, message, capsys) -> None:
    assert main(argv) == EXIT_USAGE
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_argparse_errors_exit_2() -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", "--profile", "huge"])
    assert exc.value.code == EXIT_USAGE


def test_run_end_to_end_writes_results_report_and_table(tmp_path, capsys) -> None:
    argv = [
        "run",
        "samhybrid",
        "--profile",
        "smoke",
        "--seeds",
        "1",
        "--out",
        str(tmp_path),
        "--set",
        "iterations=2",
        "--device",
        "cpu",
    ]
    assert main(argv) == EXIT_OK
    out = capsys.readouterr().out
    assert "samhybrid: ok" in out and "verdict" in out and "run folder" in out
    assert (tmp_path / "samhybrid" / "result.json").exists()
    assert (tmp_path / "REPORT.md").exists() and (tmp_path / "figures" / "samhybrid.png").exists()
    assert main(argv) == EXIT_OK  # the rerun resumes
    assert "cells resumed" in capsys.readouterr().out


def test_python_dash_m_entry_point() -> None:
    out = subprocess.run([sys.executable, "-m", "neurips26", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and "neurips26" in out.stdout


@pytest.mark.parametrize("tool", ["solar", "solexecbench"])
def test_tool_subcommands_have_their_own_help(tool, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main([tool, "--help"])
    assert exc.value.code == 0
    assert f"neurips26 {tool}" in capsys.readouterr().out
