import subprocess
import sys

import pytest

from neurips26.cli import EXIT_OK, EXIT_USAGE, main


def test_list_shows_every_method(capsys) -> None:
    assert main(["list"]) == EXIT_OK
    out = capsys.readouterr().out
    from neurips26.registry import METHODS

    rows = {line.split()[0]: line for line in out.strip().splitlines()[2:21]}
    assert list(rows) == [spec.slug for spec in METHODS]  # every method, in the catalogue's order
    assert all(spec.status_text() in rows[spec.slug] for spec in METHODS)
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
        (["run", "samhybrid", "--set", "method.rho=-1"], "rho must be finite and >= 0"),
        (["run", "samhybrid", "--set", "novalue"], "key=value"),
        (["run", "samhybrid", "--profile", "smoke", "--set", "shape=additive"], "swept by profile 'smoke'"),
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
        main(["run", "--jobs", "0"])
    assert exc.value.code == EXIT_USAGE


def test_a_method_profile_name_is_accepted_and_an_unknown_one_named(capsys) -> None:
    assert main(["run", "samhybrid", "--profile", "huge"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "samhybrid: unknown profile 'huge'; choose one of ['default', 'full', 'smoke']" in err
    assert "samhybrid: samhybrid" not in err


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


def test_bad_seed_count_is_reported_by_run_itself(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", "samhybrid", "--seeds", "0"])
    assert exc.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert "neurips26 run" in err and "--seeds" in err and "must be >= 1" in err


def test_info_shows_systems_devices_and_the_abstract(capsys) -> None:
    assert main(["info", "samhybrid"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "devices: cpu" in out and "systems (built from the default config" in out
    assert "abstract:\nHybrid modeling, the combination of machine learning models" in out


def test_info_prints_what_sets_each_system_apart_in_full(capsys) -> None:
    """spectralkv's recipes hold builder functions: info reads them as the settings they closed over (not a
    function's address), and an ablation reads as the one setting it switches off."""
    assert main(["info", "spectralkv"]) == EXIT_OK
    out = capsys.readouterr().out
    lines = {line.split(":", 1)[0].strip(): line for line in out.splitlines() if line.startswith("  ")}
    assert " at 0x" not in out
    assert "build.method.selector='topk'" in lines["spectralkv-entropy-only"]
    assert "build.method.selector='coreset'" in lines["spectralkv (ours)"]
    assert "window_size" not in lines["spectralkv (ours)"]  # shared by every system of its class: not shown


def test_info_reads_the_abstract_from_the_package_in_any_folder(tmp_path) -> None:
    """The abstract ships inside the package: an empty working folder (no shared/ beside it) still has it."""
    import os

    import neurips26

    source = os.path.dirname(os.path.dirname(neurips26.__file__))
    out = subprocess.run(
        [sys.executable, "-m", "neurips26", "info", "star"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": source},
        check=True,
    )
    assert "abstract:\nExisting Time Series Foundation Models (TSFMs)" in out.stdout


def test_publish_then_readme_refresh_round_trip(tmp_path, monkeypatch, capsys) -> None:
    import neurips26.cli as cli

    monkeypatch.setattr(cli, "RESULTS_ROOT", tmp_path / "results")
    readme = tmp_path / "README.md"
    readme.write_text("x\n<!-- results:smoke:start -->\nold\n<!-- results:smoke:end -->\n")
    monkeypatch.setattr(cli, "method_readme", lambda slug: readme)
    argv = ["run", "samhybrid", "--profile", "smoke", "--seeds", "1", "--out", str(tmp_path / "run")]
    assert main([*argv, "--set", "iterations=2", "--publish"]) == EXIT_OK
    published = tmp_path / "results" / "samhybrid" / "smoke.json"
    assert published.is_file() and oct(published.stat().st_mode & 0o044) == oct(0o044)  # readable by all
    assert main(["report", "--readme", "samhybrid", "--profile", "smoke"]) == EXIT_OK
    text = readme.read_text()
    assert "old" not in text and "results/samhybrid/smoke.json" in text and "--publish" in text


def test_a_planned_method_says_so_instead_of_running() -> None:
    from neurips26.registry import MethodSpec

    planned = MethodSpec("future", "A future paper", "agent", "api", "a claim")
    assert planned.status == "planned"
    with pytest.raises(LookupError, match="'future' is planned, not built yet"):
        planned.load_experiment()
