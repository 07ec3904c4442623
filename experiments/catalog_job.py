"""The catalog commands' former home, kept as an alias: ``trainwreck catalog`` is
``experiments.catalog.job`` and ``trainwreck report`` ``experiments.catalog.report_cmd``
(tests/hostile.py still imports ``report_main`` from here)."""

from experiments.catalog.job import catalog_main
from experiments.catalog.report_cmd import report_main

__all__ = ["catalog_main", "report_main"]
