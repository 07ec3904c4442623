"""trainwreck's public import name for what a project uses in its own code: ``trainwreck.checks``.

The engine, operators and harness live in ``mutator``, ``mutations`` and ``experiments``.
"""
