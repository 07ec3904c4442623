"""The catalog's tables as one value: what the catalog builds and the report renders.

Defined here, beside the renderers, so that the report never imports the catalog (the
catalog imports the report to write its files).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from experiments.report.operators import OperatorInfo


@dataclass
class CatalogTables:
    runs: pd.DataFrame
    curves: pd.DataFrame
    symptoms: pd.DataFrame
    control: dict[str, Any]  # the noop false-positive summary
    operators: dict[str, OperatorInfo]
