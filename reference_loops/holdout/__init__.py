"""Held-out evaluations of the reference loops, run by the harness on the trained model.

Each function takes the model the script trained (the module whose parameters the
optimizer held), the run's seed and device, and returns ``metric`` (higher is better),
``loss`` and ``chance`` (the metric of a model that learned nothing). It rebuilds the
loop's split and preprocessing itself, as the unmutated loop does them: a mutant changes
only the script file, never this code, so it cannot change how its model is measured.
The loops never import this package; only the harness does (``loop.holdout`` in
``configs/loop/*.yaml``), and the loops still run alone with ``python FILE``.
"""
