"""Rendering the catalog: ``symptoms.md``, ``study.md`` and the self-contained ``report.html``."""

from experiments.report.html import render_report_html
from experiments.report.markdown import render_study_md, render_symptoms_md

__all__ = ["render_report_html", "render_study_md", "render_symptoms_md"]
