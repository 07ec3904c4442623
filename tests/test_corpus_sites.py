"""The public-script corpus measurement (issue 22): the join of mutants, hand labels and
expected sites, its metrics, and the pinned corpus itself.

The logic is tested on a tiny script in a throwaway git mirror, so nothing here needs the
fetched mirrors; the one test that measures the real corpus skips, saying why, when the
mirror folder (``TRAINWRECK_CORPUS``, default ``/work/.mirror``) is absent.
"""

from __future__ import annotations

import ast
import csv
import os
import subprocess
from pathlib import Path

import libcst as cst
import pytest
from benchmark_modules import load

from mutations.registry import get_operator
from mutator import Operator

ROOT = Path(__file__).resolve().parent.parent


bench_sites = load("bench_sites")
cs = load("corpus_sites")
cm = load("corpus_measure")
report = load("corpus_report")

SCRIPT = """\
import torch
import torch.nn as nn

model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
criterion = nn.CrossEntropyLoss()
for x, y in [(torch.randn(8, 4), torch.randint(0, 2, (8,)))]:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
"""
OPERATORS = ("drop_zero_grad", "drop_backward", "scale_lr", "zero_grad_after_backward")


def _mutants(source: str = SCRIPT):
    return cs.mutants_of(source, "tiny", [get_operator(name) for name in OPERATORS])


def _label(mutant, label: str, diff_hash: str | None = None) -> cs.Label:
    return cs.Label(
        "tiny",
        mutant.identity,
        diff_hash or mutant.diff_hash,
        mutant.line,
        mutant.operator,
        label,
        "why",
    )


def _by_operator(found):
    return {m.operator: m for m in found}


def test_mutants_carry_identity_line_and_landing():
    found, errors = _mutants()
    assert errors == []
    by_op = _by_operator(found)
    assert set(by_op) == set(OPERATORS)
    assert by_op["drop_zero_grad"].line == 8
    assert by_op["zero_grad_after_backward"].landing == 10  # moved below backward()
    assert by_op["drop_backward"].identity == "tiny.py::<module>::drop_backward#0"


def test_diff_hash_ignores_headers_and_positions_but_not_the_edit():
    diff = "--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n-a = 1\n+a = 2\n"
    moved = "--- a/y.py\n+++ b/y.py\n@@ -7,2 +7,2 @@\n-a = 1\n+a = 2\n"
    other = "--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n-a = 1\n+a = 3\n"
    assert cs.diff_hash(diff) == cs.diff_hash(moved)
    assert cs.diff_hash(diff) != cs.diff_hash(other)


def test_the_join_counts_precision_recall_and_flags_every_gap():
    found, errors = _mutants()
    by_op = _by_operator(found)
    labels = {
        by_op["drop_zero_grad"].key: _label(by_op["drop_zero_grad"], "ok"),
        by_op["drop_backward"].key: _label(by_op["drop_backward"], "false"),
        # labelled for an older rewrite: the diff changed, so the label must not apply
        ("tiny", by_op["scale_lr"].identity, "0000000000"): _label(
            by_op["scale_lr"], "ok", "0000000000"
        ),
        # labelled ok but landing where no expected entry accepts it
        by_op["zero_grad_after_backward"].key: _label(by_op["zero_grad_after_backward"], "ok"),
    }
    expected = {
        "tiny": {
            "drop_zero_grad": [bench_sites.Entry(frozenset([8]))],
            "drop_backward": [bench_sites.Entry(frozenset([10]))],
            "zero_grad_after_backward": [bench_sites.Entry(frozenset([8]), frozenset([99]))],
            "no_shuffle": [bench_sites.Entry(frozenset([7]))],
        }
    }
    m = cm.measure({"tiny": found}, {"tiny": errors}, labels, expected)
    total = m.total()
    assert total.labels == {"ok": 2, "false": 1}
    assert total.default_path == (2, 3)  # ok / (ok + different + false)
    assert total.overall == (2, 3)
    assert (total.matched, total.expected) == (1, 4)
    assert [x.operator for x in m.stale] == ["scale_lr"]
    assert m.unlabelled == []
    assert [label.operator for label in m.orphans] == ["scale_lr"]
    assert [x.operator for x in m.unexpected_ok] == ["zero_grad_after_backward"]
    assert [(x.operator, where) for x, where in m.mislabelled] == [("drop_backward", "10")]
    missed = {(op, e.describe()) for _, op, e in m.missed}
    assert missed == {
        ("drop_backward", "10"),
        ("zero_grad_after_backward", "8 (landing after 99)"),
        ("no_shuffle", "7"),
    }
    assert any("stale label" in line for line in report.problems(m))


def test_eval_only_and_off_path_leave_default_path_precision_alone():
    tally = cm.Tally()
    tally.labels.update({"ok": 3, "eval_only": 5, "off_path": 2, "different": 1})
    tally.errors = 1
    assert tally.default_path == (3, 5)  # ok / (ok + different + false + engine errors)
    assert tally.overall == (10, 12)


class _Raises(Operator):
    name = ""  # not registered: a throwaway
    category = "gradient"
    summary = "raises"
    node_types = (cst.Call,)

    def plan(self, node, ctx):
        raise RuntimeError("boom")


def test_an_operator_that_raises_is_an_engine_error_and_the_others_still_count():
    found, errors = cs.mutants_of(SCRIPT, "tiny", [get_operator("drop_backward"), _Raises()])
    assert [m.operator for m in found] == ["drop_backward"]
    assert len(errors) == 1 and errors[0].startswith(": RuntimeError: boom")
    m = cm.measure({"tiny": found}, {"tiny": errors}, {}, {})
    assert m.total().errors == 1 and [x.operator for x in m.unlabelled] == ["drop_backward"]


def _git(*args: str, cwd: Path) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
    }
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _committed_script(tmp_path: Path) -> tuple[Path, str]:
    """SCRIPT committed as train.py in a fresh repository: (its folder, the commit)."""
    work = tmp_path / "src"
    work.mkdir()
    _git("init", "-q", cwd=work)
    (work / "train.py").write_text(SCRIPT)
    _git("add", "train.py", cwd=work)
    _git("commit", "-qm", "x", cwd=work)
    return work, _git("rev-parse", "HEAD", cwd=work)


@pytest.mark.parametrize("layout", ["worktree", "bare"])
def test_read_pinned_reads_both_mirror_layouts(tmp_path: Path, layout: str):
    work, commit = _committed_script(tmp_path)
    mirror = tmp_path / "mirror" / "someone+tiny" / "repo"
    mirror.parent.mkdir(parents=True)
    if layout == "bare":
        _git("clone", "-q", "--bare", str(work), str(mirror), cwd=tmp_path)
    else:
        _git("clone", "-q", str(work), str(mirror), cwd=tmp_path)
    script = cs.Script("tiny", "someone/tiny", commit, "train.py", "test")
    assert cs.read_pinned(script, tmp_path / "mirror") == SCRIPT
    with pytest.raises(ValueError, match=r"has no missing\.py"):
        cs.read_pinned(
            cs.Script("t", "someone/tiny", commit, "missing.py", ""), tmp_path / "mirror"
        )
    with pytest.raises(ValueError, match="no mirror of other/repo"):
        cs.read_pinned(cs.Script("t", "other/repo", commit, "x.py", ""), tmp_path / "mirror")


def test_a_missing_corpus_folder_is_one_line_and_exit_2(capsys, tmp_path: Path):
    assert report.main(["--corpus", str(tmp_path / "nowhere")]) == 2
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "no such folder" in out


# -- the pinned corpus and its hand-written files ------------------------------------------


RESERVED = {
    "pytorch/examples",
    "pytorch/tutorials",
    "graal-research/poutyne",
    "skorch-dev/skorch",
    "akamaster/pytorch_resnet_cifar10",
    "sthalles/simclr",
    "weiaicunzai/pytorch-cifar100",
    "bentrevett/pytorch-seq2seq",
}
# read for the fixes of issue 22: they can never be held out
ISSUE_22_REPOSITORIES = 18


def test_the_corpus_is_pinned_wide_and_keeps_the_reserved_repositories_out():
    scripts = cs.load_corpus()
    repos = {s.repository for s in scripts}
    assert len(scripts) >= 100 and len(repos) >= 30
    lowered = {r.lower() for r in repos}
    assert not lowered & RESERVED and not any(r.startswith("karpathy/") for r in lowered)
    assert all(len(s.commit) == 40 and int(s.commit, 16) >= 0 for s in scripts)
    assert all(s.style and s.path.endswith(".py") for s in scripts)


def _held_out_draw_present(scripts) -> None:
    """A held-out draw read for fixes joins tune (issue 29: draw 1); a fresh one must then
    be drawn: a corpus without one has no number to stand behind."""
    assert any(s.split == "held_out" for s in scripts), (
        "no held-out draw in benchmarks/corpus.toml: the last one was read for fixes; "
        "draw and label a fresh one (issue 29)"
    )


def test_the_split_is_by_repository_about_half_and_the_tuned_repositories_stay_tune():
    scripts = cs.load_corpus()
    held = [s for s in scripts if s.split == "held_out"]
    tune_repositories = {s.repository for s in scripts if s.split == "tune"}
    assert not any(s.repository in tune_repositories for s in held)
    _held_out_draw_present(scripts)
    # Draw 1 was half the corpus; once read for fixes it joined tune, and the fresh draw 2
    # (new repositories, labelled before any fix) is smaller: it must stay one draw, of
    # enough scripts and authors to say something.
    assert len({s.draw for s in held}) == 1
    assert len(held) >= 20 and len({s.repository for s in held}) >= 10
    first = []  # the issue-22 scripts come first in corpus.toml
    for s in scripts:
        if s.repository not in first:
            first.append(s.repository)
    tuned = set(first[:ISSUE_22_REPOSITORIES])
    assert all(s.split == "tune" for s in scripts if s.repository in tuned)
    header = cs.CORPUS.read_text(encoding="utf-8").split("[[script]]")[0]
    assert "seed: 2029" in header and "method:" in header and "date:" in header


def test_offline_scripts_say_how_to_run_them():
    scripts = cs.load_corpus()
    offline = [s for s in scripts if s.offline]
    assert all(isinstance(s.argv, tuple) for s in offline)
    assert not any(s.argv for s in scripts if not s.offline)
    # draw 1's 15 offline held-out scripts joined tune with it; the issue-28 witness
    # measurement on unread code needs offline scripts in the next draw
    assert len([s for s in offline if s.draw == 1]) >= 15


def test_a_repository_in_both_halves_or_an_unknown_half_is_refused(tmp_path: Path):
    entry = 'name = "{n}"\nrepository = "{r}"\ncommit = "{c}"\npath = "a.py"\nstyle = "s"\nsplit = "{s}"\n'
    both = "".join(
        "[[script]]\n" + entry.format(n=n, r="a/b", c="0" * 40, s=s)
        for n, s in (("x", "tune"), ("y", "held_out"))
    )
    (tmp_path / "both.toml").write_text(both)
    with pytest.raises(ValueError, match="one split only: a/b"):
        cs.load_corpus(tmp_path / "both.toml")
    (tmp_path / "odd.toml").write_text(
        "[[script]]\n" + entry.format(n="x", r="a/b", c="0" * 40, s="test")
    )
    with pytest.raises(ValueError, match="split is one of held_out, tune: x"):
        cs.load_corpus(tmp_path / "odd.toml")


def _tiny_corpus(tmp_path: Path, monkeypatch) -> Path:
    """A mirror with two one-script repositories, one per half; labels for the held-out one,
    and no expected section for the tune one (not yet labelled)."""
    work, commit = _committed_script(tmp_path)
    for repo in ("someone+held", "someone+tuned"):
        (tmp_path / "mirror" / repo).mkdir(parents=True)
        _git(
            "clone",
            "-q",
            "--bare",
            str(work),
            str(tmp_path / "mirror" / repo / "repo"),
            cwd=tmp_path,
        )
    entry = '[[script]]\nname = "{n}"\nrepository = "someone/{r}"\ncommit = "{c}"\npath = "train.py"\nstyle = "s"\nsplit = "{s}"\n'
    corpus = tmp_path / "corpus.toml"
    corpus.write_text(
        entry.format(n="tiny_tune", r="tuned", c=commit, s="tune")
        + entry.format(n="tiny", r="held", c=commit, s="held_out")
    )
    found, _ = cs.mutants_of(SCRIPT, "tiny", [get_operator("drop_backward")])
    labels = tmp_path / "labels.csv"
    with labels.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(cs.COLUMNS)
        writer.writerow(
            [
                "tiny",
                found[0].identity,
                found[0].diff_hash,
                found[0].line,
                "drop_backward",
                "ok",
                "step",
            ]
        )
    expected = tmp_path / "expected.toml"
    expected.write_text("[tiny]\ndrop_backward = [10]\n")
    monkeypatch.setattr(cs, "CORPUS", corpus)
    monkeypatch.setattr(cs, "LABELS", labels)
    monkeypatch.setattr(cs, "EXPECTED", expected)
    monkeypatch.setattr(cs, "all_operators", lambda: [get_operator("drop_backward")])
    return tmp_path / "mirror"


def test_the_report_puts_the_held_out_half_first_and_a_script_not_yet_labelled_fails_check(
    tmp_path: Path, monkeypatch, capsys
):
    mirror = _tiny_corpus(tmp_path, monkeypatch)
    assert report.main(["--corpus", str(mirror)]) == 0
    out = capsys.readouterr().out
    assert out.index("== held_out: 1 labelled") < out.index("== tune: 0 labelled")
    assert "default-path precision 100.0% (1/1)" in out
    assert "not yet labelled (1 scripts, in no number): tiny_tune" in out
    assert report.main(["--corpus", str(mirror), "--check"]) == 1
    capsys.readouterr()
    assert report.main(["--corpus", str(mirror), "--split", "held_out", "--check"]) == 0
    out = capsys.readouterr().out
    assert "== held_out" in out and "== tune" not in out and "problems" not in out


def test_labels_and_expected_sites_name_corpus_scripts_and_explain_wrong_mutants():
    names = {s.name for s in cs.load_corpus()}
    with cs.LABELS.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert tuple(rows[0]) == cs.COLUMNS
    assert {row["script"] for row in rows} <= names
    assert all(row["label"] in cs.LABEL_KINDS and row["reason"].strip() for row in rows)
    assert set(cs.load_expected()) <= names


MIRROR = Path(os.environ.get("TRAINWRECK_CORPUS", "/work/.mirror"))


@pytest.mark.slow
@pytest.mark.skipif(
    not MIRROR.is_dir(),
    reason=f"no corpus mirror at {MIRROR} (set TRAINWRECK_CORPUS to the fetch tool's folder)",
)
@pytest.mark.parametrize(
    ("half", "precision", "recall"),
    # what holds on each half (docs/benchmarks.md, issue 29); issue 29's targets for the
    # held-out half are 97% / 0 false / 90%, not met: draw 2's first labels measured 91.7%
    # and recall 83.8%, after round 3 91.9% / 84.4%; tune (draw 1 included) 96.5% / 96.8%
    [("held_out", 0.91, 0.84), ("tune", 0.96, 0.96)],
)
def test_every_corpus_mutant_is_labelled_consistent_and_within_what_holds(half, precision, recall):
    """A changed operator must not keep an old label: any new, stale or inconsistent row
    fails; and each half keeps the precision and recall it was measured at."""
    scripts = [s for s in cs.load_corpus() if s.split == half]
    assert scripts, f"no {half} scripts in benchmarks/corpus.toml (issue 29: draw a fresh one)"
    mutants, errors, missing = cs.collect(scripts, MIRROR)
    m = cm.measure(mutants, errors, cs.load_labels(), cs.load_expected())
    m.missing_scripts = missing
    found = report.problems(m) + [
        f"not yet labelled: {s.name}" for s in scripts if s.name not in cs.load_expected()
    ]
    assert found == [], "\n".join(found[:40])
    total = m.total()
    ok, judged = total.default_path
    assert ok / judged >= precision, f"default-path precision {ok}/{judged}"
    assert total.matched / total.expected >= recall, f"recall {total.matched}/{total.expected}"


def test_the_benchmark_scripts_import_one_another_without_a_circle():
    """bench_sites.py runs the corpus report, so the definitions both read (``site_match``)
    live apart: corpus_sites.py importing bench_sites.py again was a circle (issue 29)."""
    folder = ROOT / "benchmarks"
    local = {path.stem for path in folder.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for stem in local:
        tree = ast.parse((folder / f"{stem}.py").read_text(encoding="utf-8"))
        named = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                named.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                named.add(node.module)
        graph[stem] = named & local - {stem}

    def circle_from(start: str, at: str, seen: tuple[str, ...]) -> tuple[str, ...] | None:
        for target in sorted(graph[at]):
            if target == start:
                return (*seen, target)
            if target not in seen:
                found = circle_from(start, target, (*seen, target))
                if found:
                    return found
        return None

    circles = [c for stem in sorted(graph) if (c := circle_from(stem, stem, (stem,)))]
    assert circles == [], " ; ".join(" -> ".join(c) for c in circles)
    assert "site_match" in graph["corpus_sites"] and "corpus_sites" in graph["corpus_report"]


def test_select_picks_scripts_by_name_half_and_draw_and_names_the_unknown():
    scripts = [
        cs.Script("a", "o/a", "0" * 40, "a.py", "s", "tune"),
        cs.Script("b", "o/b", "0" * 40, "b.py", "s", "held_out", draw=2),
        cs.Script("c", "o/c", "0" * 40, "c.py", "s", "held_out", draw=2),
    ]
    assert [s.name for s in cs.select(scripts, None, "held_out", 2)[0]] == ["b", "c"]
    assert cs.select(scripts, None, "all", 1)[0] == scripts[:1]
    chosen, unknown = cs.select(scripts, ["c", "zz"], "held_out")
    assert [s.name for s in chosen] == ["c"] and unknown == ["zz"]
