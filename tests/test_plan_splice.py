"""A planned sweep holds each mutant as a splice of its file (issue 15: planning linear in
script size). The splice must be invisible: same text, same digest, same cache key, same
diff and reach regions as the mutant built whole, and a cached run never renders it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from experiments import sweep as sweeps
from experiments.harness import RunSpec, reach, run_sweep
from experiments.harness.spec import Splice, source_sha
from mutator import SourceFile
from mutator.diff import unified_diff
from mutator.splice import Lines

ROOT = Path(__file__).resolve().parent.parent
LOOPS = ("mlp_digits", "char_lm", "resume_digits")
SCRIPTS = Path(__file__).parent / "scripts"


@pytest.mark.parametrize("loop", LOOPS)
def test_planned_splices_give_the_whole_mutants_text_and_keys(loop):
    path = ROOT / "reference_loops" / f"{loop}.py"
    specs = sweeps.build(
        sweeps.Sweep(
            loops=[sweeps.Loop(script=str(path), cwd=str(ROOT))],
            operators=[sweeps.VARIANTS],
            seeds=[0, 1],
        )
    )
    parsed = SourceFile.from_path(str(path))
    whole = {
        site.identity: parsed.apply([site]).source
        for site in parsed.find_sites(sweeps.operators_for([sweeps.VARIANTS]))
    }
    mutants = [spec for spec in specs if spec.mutant is not None]
    assert len(mutants) == 2 * len(whole) > 0
    for spec in mutants:
        assert isinstance(spec.source, Splice)
        text = spec.text()
        assert text == whole[spec.identity]
        assert spec.sha256 == source_sha(text) == spec.mutant["sha256"]
        # The key the sweep planned before splices existed (a RunSpec holding the text).
        eager = dataclasses.replace(spec, source=text)
        assert spec.key == eager.key
        assert spec.mutant["reach_regions"] == reach.regions(parsed.source, text)


@pytest.mark.parametrize("loop", LOOPS)
def test_spliced_diffs_equal_whole_file_diffs(loop):
    parsed = SourceFile.from_path(str(ROOT / "reference_loops" / f"{loop}.py"))
    for site in parsed.find_sites(sweeps.operators_for([sweeps.VARIANTS])):
        mutant = parsed.apply([site])
        assert Splice(parsed.source, mutant.edits).render() == mutant.source
        diff, lines, mutant_lines = unified_diff(parsed.source, mutant.source, parsed.target)
        assert (mutant.diff, mutant.lines, mutant.mutant_lines) == (diff, lines, mutant_lines)


SOURCES = [
    "a = 1\nb = 2\nc = 3\nd = 4\n",
    "a = 1\r\nb = 2\r\nc = 3\r\nd = 4",  # CRLF, no final newline
    "a = 1\rb = 2\rc = 3\rd = 4\r",  # CR only: an edit after "\r" could make "\r\n"
    "x\n\n\ny\n",
]


@pytest.mark.parametrize("source", SOURCES)
def test_lines_of_a_mutant_match_splitting_it_whole(source):
    lines = Lines(source)
    size = len(source)
    edits_cases = [
        ((0, 0, "\n"),),
        ((size, size, "\nz = 9"),),
        ((0, size, "all new\n"),),
    ]
    for start in range(size + 1):
        for end in range(start, min(size, start + 3) + 1):
            for text in ("", "\n", "q", "\nq\r"):
                edits_cases.append(((start, end, text),))
    edits_cases.append(((1, 2, "\n"), (size - 1, size, "w\r\n")))
    for edits in edits_cases:
        mutant = Splice(source, edits).render()
        for keepends in (True, False):
            got, head, tail = lines.of_mutant(mutant, edits, keepends)
            assert got == mutant.splitlines(keepends), (edits, keepends)
            # The shared lines are really shared (the diff skips comparing them).
            whole = mutant.splitlines(True)
            assert whole[:head] == lines.kept[:head]
            assert tail == 0 or whole[-tail:] == lines.kept[-tail:]


class _Unrenderable(Splice):
    def render(self) -> str:
        raise AssertionError("a cached run rendered its source")


def test_a_cached_run_never_renders_its_source(tmp_path):
    path = SCRIPTS / "train_tiny.py"
    source = path.read_text()
    edits = ((0, 0, "# mutant\n"),)
    text = Splice(source, edits).render()
    spec = RunSpec(
        script=str(path),
        source=Splice(source, edits, source_sha(text)),
        argv=("--epochs", "1"),
        loop="train_tiny",
        mutant={"identity": "train_tiny.py::comment#0"},
    )
    (first,) = run_sweep([spec], tmp_path, workers=1)
    assert first["status"] == "ok"
    assert (Path(first["run_dir"]) / "mutant.py").read_text() == text
    again = dataclasses.replace(spec, source=_Unrenderable(source, edits, source_sha(text)))
    (second,) = run_sweep([again], tmp_path, workers=1)
    assert second["key"] == first["key"] and second["status"] == "ok"
