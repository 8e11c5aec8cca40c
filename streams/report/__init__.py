"""Loop reports over replay output or recorded sessions (``loopwatch report``).

* :mod:`.model` -- verdict records aggregated per session, run and call, with fleet totals;
* :mod:`.compare` -- backtesting: the same events under two configurations;
* :mod:`.text` / :mod:`.html` -- the renderers (plain text; one self-contained HTML page).
"""

from .compare import Comparison, Difference, compare, outcome_label
from .html import render_html
from .model import Call, Compaction, DetectionRow, Report, RunReport, SessionReport, Totals, build_report, where
from .text import render_comparison_text, render_text

__all__ = [
    "Call",
    "Compaction",
    "Comparison",
    "DetectionRow",
    "Difference",
    "Report",
    "RunReport",
    "SessionReport",
    "Totals",
    "build_report",
    "compare",
    "outcome_label",
    "render_comparison_text",
    "render_html",
    "render_text",
    "where",
]
