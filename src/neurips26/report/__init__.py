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

__all__ = [
    "analysis_block",
    "analysis_figure_link",
    "analysis_markers",
    "build_report",
    "current_analysis_block",
    "current_readme_block",
    "readme_block",
    "refresh_analysis_blocks",
    "refresh_method_readme",
    "results_markers",
]
