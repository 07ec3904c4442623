"""``trainwreck bench export``: the bundle's files, ground truth and index; atomic writes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from test_bench_support import decreasing, synthetic_records, write_run

from experiments.bench.cli import bench_main
from experiments.bench.export import export_bundle
from mutations.registry import get_operator
from mutator import SourceFile

STYLE = Path(__file__).resolve().parent / "styles" / "flat_script.py"


@pytest.fixture
def loop(tmp_path: Path) -> Path:
    folder = tmp_path / "loops"
    folder.mkdir()
    return Path(shutil.copy(STYLE, folder / "flat.py"))


def test_bundle_has_sources_truth_traces_index_and_readme(tmp_path: Path, loop: Path):
    results = tmp_path / "results"
    write_run(results, "ab01", synthetic_records(decreasing(10)), loop="flat")
    counts = export_bundle(tmp_path / "bundle", [loop], results)
    bundle = tmp_path / "bundle"
    assert (bundle / "clean" / "flat.py").read_text() == STYLE.read_text()
    truth = [json.loads(line) for line in (bundle / "ground_truth.jsonl").read_text().splitlines()]
    assert counts["mutant"] == len(truth) > 0 and counts["clean"] == 1 and counts["run"] == 1
    # every mutant file differs from the original exactly at its recorded lines
    source = SourceFile(STYLE.read_text(), "flat.py")
    expected = {
        m.identity: m
        for m in (source.apply([s]) for s in source.find_sites([get_operator("drop_zero_grad")]))
    }
    [entry] = [t for t in truth if t["identity"] in expected]
    mutant = expected[entry["identity"]]
    assert (bundle / entry["path"]).read_text() == mutant.source
    assert entry["mutant_lines"] == list(mutant.mutant_lines) and entry["categories"] == [
        "gradient"
    ]
    assert entry["contexts"] == list(mutant.contexts) == ["train"]  # where the site is
    index = pd.read_parquet(bundle / "index.parquet")
    assert sorted(index["kind"].unique()) == ["clean", "mutant", "run"]
    assert (bundle / "traces" / "ab01" / "trace.jsonl").exists()
    readme = (bundle / "README.md").read_text()
    assert "ground_truth.jsonl" in readme and "drop_zero_grad" in readme
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".bundle")], (
        "no staging left behind"
    )


def test_export_refuses_a_non_empty_folder_and_leaves_it_alone(tmp_path: Path, loop: Path, capsys):
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError):
        export_bundle(out, [loop])
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    assert bench_main(["export", str(out)]) == 2
    assert "not an empty folder" in capsys.readouterr().err


def test_bench_command_user_errors(capsys):
    assert bench_main([]) == 2
    assert bench_main(["--detector", "no-such-detector"]) == 2
    assert "unknown detector" in capsys.readouterr().err
    assert bench_main(["--detector", "trainwreck-lint", "--loops", "no_such_loop"]) == 2
    assert bench_main(["--detector", "trainwreck-lint", "--option", "bad"]) == 2
