"""``trainwreck test``: would a project's own tests catch a training bug?

Each mutant of the named files runs the project's test command in a private copy of the
project and ends ``killed``, ``survived``, ``timeout``, ``stillborn`` or ``unreached``.
Modules, in the order a session uses them: ``command`` (what to run), ``discovery`` (the
mutants; ``since`` narrows them to changed lines), ``cache``, ``baseline`` (the unmutated
command must pass; with pytest it records which test ran which line: ``lines``),
``selection`` (the tests a mutant needs), ``forkserver``/``fresh`` (one process per
mutant: a fork of a warm parent, or a new interpreter) running ``child``/``plugin``,
``outcome`` (the status), ``report``/``html`` (the files), ``session`` and ``cli``.
"""
