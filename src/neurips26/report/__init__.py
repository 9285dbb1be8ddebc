"""Reports rebuilt from results JSON: Markdown tables and matplotlib figures."""

from neurips26.report.builder import (
    analysis_block,
    analysis_figure_link,
    analysis_markers,
    build_report,
    current_analysis_block,
    current_readme_block,
    readme_block,
    refresh_analysis_blocks,
    refresh_method_readme,
    results_markers,
)
from neurips26.report.verdicts import readme_analyses, verdict_sentences

__all__ = [
    "analysis_block",
    "analysis_figure_link",
    "analysis_markers",
    "build_report",
    "current_analysis_block",
    "current_readme_block",
    "readme_analyses",
    "readme_block",
    "refresh_analysis_blocks",
    "refresh_method_readme",
    "results_markers",
    "verdict_sentences",
]
