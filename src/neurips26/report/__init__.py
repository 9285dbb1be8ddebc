"""Reports rebuilt from results JSON: Markdown tables and matplotlib figures."""

from neurips26.report.builder import (
    build_report,
    current_readme_block,
    readme_block,
    refresh_method_readme,
    results_markers,
)

__all__ = ["build_report", "current_readme_block", "readme_block", "refresh_method_readme", "results_markers"]
