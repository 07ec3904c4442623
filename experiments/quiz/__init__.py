"""Study mode: practice loops with several bugs, their measured curves, an answer key.

``trainwreck quiz`` draws a higher-order mutant of a reference loop (``draw``), measures
it against the correct loop under the harness (``measure``), writes the practice folder
(``folder``, ``page``); ``quiz answer`` prints the key (``key``), ``quiz grade`` scores an
answer (``grade``) and ``quiz interactions`` measures how bugs combine (``interactions``).
The command-line entry point is ``experiments.quiz.cli.quiz_main``.
"""
