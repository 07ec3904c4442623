"""The symptom catalog, built from stored runs only (no training happens here but in ``job``).

From stored runs to files, one module per step:

- ``runs``: ``load_runs(results_dir)`` finds every ``runs/**/result.json`` with its trace
  and computes each run's signature once, through ``sigcache`` (cached beside the trace,
  keyed by the size and mtime of trace and result, the signature code and ``n_classes``);
- ``frame``: the ``runs`` table (one row per run; labels read from the identity);
- ``tables``: ``build_tables(runs)`` judges every mutant (``experiments.symptoms``) and
  returns the ``runs``, ``curves`` and ``symptoms`` tables; ``stopping_decisions`` is the
  sequential rule's verdict per mutant (what adaptive seeds ask after each round);
- ``write``: ``write_catalog(tables, out_dir)`` writes every file into a temporary folder
  and renames it into place, so a reader sees the old catalog or the new one, never a mix;
- ``rebuild``: ``rebuild_report(results_dir)``, all of the above.

The commands: ``job`` (``trainwreck catalog``: ``profiles`` and ``plan`` say what runs),
``report_cmd`` (``trainwreck report RESULTS_DIR``).

The names below load on first use, so ``trainwreck catalog --help`` does not import pandas.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_HOMES = {
    "LoadedRun": "runs",
    "extract_curves": "runs",
    "find_result_files": "runs",
    "load_runs": "runs",
    "read_trace_fast": "runs",
    "SIGNATURE_CACHE": "sigcache",
    "SIGNATURE_VERSION": "sigcache",
    "operator_name": "frame",
    "site_label": "frame",
    "variant_label": "frame",
    "CURVE_METRICS": "tables",
    "annotate_symptoms": "tables",
    "build_tables": "tables",
    "stopping_decisions": "tables",
    "CARRIED_FILES": "write",
    "CATALOG_FILES": "write",
    "write_catalog": "write",
    "CatalogSummary": "rebuild",
    "rebuild_report": "rebuild",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{home}"), name)
