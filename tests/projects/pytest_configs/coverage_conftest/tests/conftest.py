"""A project that starts coverage.py itself, from its conftest (no pytest-cov)."""

import coverage

COVERAGE = coverage.Coverage(data_file=None)
COVERAGE.start()
