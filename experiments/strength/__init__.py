"""Minimal strength: the weakest setting of a parametric operator at which its bug shows.

``axes`` declares each parametric operator's span, ``bisect`` the search, ``search`` the
statistics of one setting (adaptive seeds, judged like a catalog mutant), ``runner`` the
wiring to a loop, ``cli`` the ``trainwreck strength`` command and ``plot`` its figure.
"""
