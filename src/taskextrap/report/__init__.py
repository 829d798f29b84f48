"""Results schema, the paper's published numbers, tables and plots.

``paper_values`` holds the only hand-typed numbers in the package (the paper's tables).
matplotlib and jsonschema are imported lazily, inside the functions that need them.
"""

from taskextrap.report.compare import clear_claims, compare_rows, paired_difference
from taskextrap.report.paper_values import PAPER_VALUES, paper_source, paper_value
from taskextrap.report.plots import plot_curves, plot_embedding, plot_predictions
from taskextrap.report.schema import (
    RESULTS_SCHEMA,
    bootstrap_ci95,
    environment_info,
    make_row,
    summarize_errors,
    validate_results,
)
from taskextrap.report.tables import (
    comparison_table,
    console_table,
    format_number,
    load_results,
    render_report,
    results_markdown,
)

__all__ = [
    "PAPER_VALUES",
    "RESULTS_SCHEMA",
    "bootstrap_ci95",
    "clear_claims",
    "compare_rows",
    "comparison_table",
    "console_table",
    "environment_info",
    "format_number",
    "load_results",
    "make_row",
    "paired_difference",
    "paper_source",
    "paper_value",
    "plot_curves",
    "plot_embedding",
    "plot_predictions",
    "render_report",
    "results_markdown",
    "summarize_errors",
    "validate_results",
]
