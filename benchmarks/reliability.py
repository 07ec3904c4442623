"""Run issue 15's probes (tests/hostile.py) and write their table to docs/reliability.md.

Usage: python benchmarks/reliability.py [--out docs/reliability.md]

Each probe is a real process (a run of a hostile or sloppy script, a sweep, the CLI);
the table says what was expected and what happened. The text around the table is kept:
only the part between the two markers is replaced.
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from hostile import PROBES  # noqa: E402

BEGIN, END = "<!-- reliability table: begin -->", "<!-- reliability table: end -->"


def table() -> tuple[str, int]:
    rows = ["| probe | expected | observed | held |", "|---|---|---|---|"]
    failures = 0
    for probe in PROBES:
        with tempfile.TemporaryDirectory() as folder:
            started = time.monotonic()
            try:
                observed, held = probe.run(Path(folder))
            except Exception as error:  # a probe that breaks is a finding too
                observed, held = f"probe raised {type(error).__name__}: {error}", False
            seconds = time.monotonic() - started
        failures += not held
        cell = observed.replace("|", "\\|").replace("\n", " ")
        rows.append(
            f"| {probe.name} | {probe.expected} | {cell} ({seconds:.1f} s) | "
            f"{'yes' if held else '**no**'} |"
        )
        print(rows[-1], flush=True)
    stamp = f"Written by `python benchmarks/reliability.py` on {date.today()}, {platform.node()}."
    return "\n".join([BEGIN, stamp, "", *rows, END]), failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "reliability.md")
    args = parser.parse_args()
    text, failures = table()
    current = args.out.read_text(encoding="utf-8") if args.out.exists() else f"{BEGIN}\n{END}\n"
    head, _, rest = current.partition(BEGIN)
    _, _, tail = rest.partition(END)
    args.out.write_text(head + text + tail, encoding="utf-8")
    print(f"{len(PROBES) - failures}/{len(PROBES)} probes held; wrote {args.out}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
