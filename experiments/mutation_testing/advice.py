"""What to tell a user whose test command pytest refused (exit status 4, a usage error).

The common case: an option of a plugin that is disabled or not installed, usually from the
project's ``addopts`` (``--cov=pkg`` after ``-p no:cov``, ``-n 4`` without pytest-xdist).
Disabling a plugin does not remove its options from the configuration; the plugin's own
switch does (``--no-cov``, ``-n 0``), and ``-o addopts=""`` drops the configured ones.
"""

from __future__ import annotations

import re

# option prefix -> (plugin, how to turn it off while keeping its options valid)
KNOWN = {
    "--cov": ("pytest-cov", "--no-cov (trainwreck test turns coverage off in its runs anyway)"),
    "--no-cov": ("pytest-cov", "leaving pytest-cov enabled"),
    "-n": ("pytest-xdist", "-n 0 (trainwreck test runs each run's tests in one process anyway)"),
    "--numprocesses": ("pytest-xdist", "-n 0"),
    "--dist": ("pytest-xdist", "-n 0"),
    "--timeout": ("pytest-timeout", "--timeout=0"),
    "--randomly": ("pytest-randomly", "-p no:randomly only when no --randomly option is set"),
}
_UNRECOGNIZED = re.compile(r"unrecognized arguments: (.+)")


def for_usage_error(output: str) -> str:
    """A sentence (starting with "; ") naming the plugin behind the first option pytest did
    not recognise and how to turn it off, or "" when the output names none."""
    found = _UNRECOGNIZED.search(output)
    if not found:
        return ""
    option = found.group(1).split()[0]
    for prefix, (plugin, switch) in KNOWN.items():
        if (
            option == prefix
            or option.startswith(prefix + "=")
            or (prefix.startswith("--") and option.startswith(prefix + "-"))
            or (prefix == "-n" and re.fullmatch(r"-n\d*", option))
        ):
            return (
                f"; pytest did not recognise {option}, an option of {plugin}, which is "
                f"disabled (-p no:...) or not installed: keep it and turn it off with "
                f"{switch}, or drop the configured options with -o addopts=''"
            )
    return (
        f"; pytest did not recognise {option}: an option of a plugin that is disabled "
        "(-p no:...) or not installed? Turn the plugin off with its own option instead, "
        "or drop the configured options with -o addopts=''"
    )
