"""Everything that runs: harness, telemetry, signatures, catalog, benchmark, Hydra app.

Importing this package is cheap: submodules import torch, pandas or hydra only when used.
"""
