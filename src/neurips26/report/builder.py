"""``neurips26 report RUN_DIR``: REPORT.md and one figure per method, rebuilt from the JSON alone."""

from __future__ import annotations

import re
from pathlib import Path

from neurips26.bench.results import find_results, read_result
from neurips26.core.files import atomic_write_text
from neurips26.report.figures import method_figure
from neurips26.report.tables import SUMMARY_HEADER, markdown_table, method_section, summary_rows

RESULTS_START = "<!-- results:start -->"
RESULTS_END = "<!-- results:end -->"


def build_report(run_dir: str | Path) -> Path:
    """Write ``RUN_DIR/REPORT.md`` and ``RUN_DIR/figures/<slug>.png``; returns the report's path."""
    run_dir = Path(run_dir)
    results = [read_result(path) for path in find_results(run_dir)]
    if not results:
        raise FileNotFoundError(f"{run_dir}: no <method>/result.json files to report on")
    sections = []
    for result in results:
        slug = result["run_info"]["slug"]
        figure = method_figure(result, run_dir / "figures" / f"{slug}.png")
        section = f"## {slug}\n\n" + method_section(result, figure.relative_to(run_dir).as_posix())
        pareto_x = result["run_info"].get("pareto_x")
        if pareto_x:
            pareto = method_figure(result, run_dir / "figures" / f"{slug}_pareto.png", x_metric=pareto_x)
            section += (
                f"\n\n![{slug}: headline metric vs {pareto_x}]({pareto.relative_to(run_dir).as_posix()})"
            )
        sections.append(section)
    text = "\n\n".join(
        [
            f"# neurips26 report: {run_dir.name}",
            markdown_table(SUMMARY_HEADER, summary_rows(results)),
            *sections,
        ]
    )
    return atomic_write_text(run_dir / "REPORT.md", text + "\n")


def refresh_method_readme(readme: str | Path, result: dict, command: str) -> bool:
    """Replace the text between the results markers of a method README; False if it has no markers."""
    readme = Path(readme)
    text = readme.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(RESULTS_START) + ".*?" + re.escape(RESULTS_END), re.DOTALL)
    if not pattern.search(text):
        return False
    block = f"{RESULTS_START}\nReproduce with `{command}`.\n\n{method_section(result)}\n{RESULTS_END}"
    atomic_write_text(readme, pattern.sub(lambda _: block, text))
    return True
