"""The detector benchmark: detectors of training bugs scored against trainwreck's mutants.

- ``api``: findings, detector kinds, the registry (entry-point group ``trainwreck.detectors``).
- ``lint``: ``trainwreck-lint``, a static LibCST linter for training-loop bugs.
- ``rules``: ``trainwreck-rules``, causal rule checks over a run's trace.
- ``diagnoser``: ``trainwreck-diagnoser``, a learned classifier on trace features.
- ``external``: adapters for TorchFix, torcheck and TrainCheck (each in its own venv).
- ``corpus``: the cases (mutants of the reference loops, stored runs) with ground truth.
- ``score``: running detectors with isolation, scores, the leaderboard.
- ``export``: the self-contained benchmark bundle.
- ``cli``: ``lint_main`` and ``bench_main`` for the ``trainwreck`` command.
"""
