"""The operator library's behaviour, pinned: every first-order mutant of every script.

A refactor of the operators must leave this snapshot identical. When a change is meant
to alter mutants (an operator bug fixed, a reference loop edited), regenerate it with
``python tests/test_operator_snapshot.py --update`` and say why in the commit.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from mutations.registry import all_variants  # noqa: E402
from mutator import SourceFile  # noqa: E402

SNAPSHOT = ROOT / "tests" / "data" / "mutant_snapshot.json"


def scripts() -> list[Path]:
    loops = sorted(p for p in (ROOT / "reference_loops").glob("*.py") if not p.name.startswith("_"))
    return loops + sorted((ROOT / "tests" / "styles").glob("*.py"))


def mutant_table() -> dict[str, list[list[str]]]:
    """Script path (from the repo root) -> [identity, sha256] of each first-order mutant."""
    operators = all_variants()
    table: dict[str, list[list[str]]] = {}
    for path in scripts():
        source = SourceFile.from_path(str(path))
        mutants = (source.apply([site]) for site in source.find_sites(operators))
        table[path.relative_to(ROOT).as_posix()] = [[m.identity, m.sha256] for m in mutants]
    return table


def _differences(stored: dict, current: dict) -> list[str]:
    lines = []
    for script in sorted(set(stored) | set(current)):
        before = dict(map(tuple, stored.get(script, [])))
        after = dict(map(tuple, current.get(script, [])))
        changed = [i for i in sorted(before.keys() & after.keys()) if before[i] != after[i]]
        found = (
            [f"{script}: lost {i}" for i in sorted(before.keys() - after.keys())]
            + [f"{script}: new {i}" for i in sorted(after.keys() - before.keys())]
            + [f"{script}: changed {i}" for i in changed]
        )
        if not found and stored.get(script) != current.get(script):
            found.append(f"{script}: same mutants, other order")
        lines += found
    return lines


def test_mutants_match_the_snapshot():
    stored = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    current = mutant_table()
    differences = _differences(stored, current)
    assert not differences, (
        "mutants differ from tests/data/mutant_snapshot.json (regenerate with "
        "`python tests/test_operator_snapshot.py --update` only if the change is meant):\n"
        + "\n".join(differences[:40])
    )


def test_snapshot_covers_every_script():
    stored = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    expected = {path.relative_to(ROOT).as_posix() for path in scripts()}
    assert set(stored) == expected
    assert all(stored[script] for script in expected), "every script has mutants"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="rewrite the stored snapshot")
    args = parser.parse_args()
    current = mutant_table()
    if args.update:
        SNAPSHOT.parent.mkdir(parents=True, exist_ok=True)
        SNAPSHOT.write_text(json.dumps(current, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {sum(map(len, current.values()))} mutants of {len(current)} scripts")
        return
    differences = _differences(json.loads(SNAPSHOT.read_text(encoding="utf-8")), current)
    print("\n".join(differences) or "snapshot matches")
    sys.exit(1 if differences else 0)


def test_no_two_operators_make_the_same_mutant():
    """Honest sets (issue 14): two operators whose mutants are byte-identical at a site are
    one bug counted twice (train_val_leakage and validate_on_training_data once were)."""
    stored = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    twins = []
    for script, rows in stored.items():
        by_source: dict[str, set[str]] = {}
        for identity, digest in rows:
            operator = identity.rsplit("::", 1)[-1].split("#")[0].split("(")[0]
            by_source.setdefault(digest, set()).add(operator)
        twins += [f"{script}: {sorted(ops)}" for ops in by_source.values() if len(ops) > 1]
    assert not twins, twins


if __name__ == "__main__":
    main()
