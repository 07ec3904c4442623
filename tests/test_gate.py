"""The static gate (issue 22): every site proves it is the bug its operator names.

Two kinds of tests. Whole scripts in tests/gate/, each written in a public style to
reproduce one kind of false or off-target mutant seen on real code, pin exactly which
places are rejected, by which check (a rejection too many is as wrong as one too few).
Small operators defined here exercise each gate check on its own: what it rejects, and
the nearby spellings it must let through.
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from experiments.cli import main
from mutations.registry import all_variants
from mutator import SourceFile, Swap
from mutator.gate import NON_SITE, OFF_CONTEXT, STILLBORN_ERRORS, Rejected
from mutator.semantics import parse_expr, with_keyword

GATE = Path(__file__).resolve().parent / "gate"

# fixture -> {(operator label, line, check)} of every rejected place, all operators.
REJECTED = {
    "eval_loader.py": {
        ("no_shuffle", 17, "training_loader"),
        ("change_batch_size", 17, "training_loader"),
        ("change_batch_size(factor=0.125)", 17, "training_loader"),
    },
    "negative_split.py": {
        ("drop_training_data", 14, "slice_direction"),
        ("drop_training_data(fraction=0.5)", 14, "slice_direction"),
    },
    "pipelines_per_function.py": {
        ("augment_validation", 28, "unbound_name"),
        ("train_val_leakage", 37, "unbound_name"),
        # The test pipeline's own Normalize: skip_val_normalization's site (issue 29 lists it).
        ("drop_input_normalization", 31, NON_SITE),
    },
    "gelu_mlp.py": {
        ("drop_activation", 22, NON_SITE),
        ("drop_activation", 27, NON_SITE),
    },
    "reinforce.py": {
        ("drop_input_normalization", 39, NON_SITE),
        ("normalize_by_wrong_stat", 39, NON_SITE),  # the returns: no model reads them
    },
    "loss_module_names.py": set(),
    "rnn_step_function.py": {
        ("retain_graph_left_in", 32, NON_SITE),
        ("drop_eval_mode", 39, NON_SITE),
        ("drop_train_mode", 41, NON_SITE),
        ("eval_mode_before_training", 41, NON_SITE),
        ("drop_train_mode", 59, NON_SITE),
        ("eval_mode_before_training", 59, NON_SITE),
        ("train_mode_outside_loop", 59, NON_SITE),
        ("drop_no_grad", 62, NON_SITE),
        # Its one caller already runs under no_grad (line 62): deleting either switch alone
        # changes nothing, so neither is a first-order site (issue 22, corpus branch).
        ("drop_no_grad", 37, NON_SITE),
    },
    "full_batch_logreg.py": {
        ("change_batch_size", 13, NON_SITE),
        ("optimizer_partial_params", 16, NON_SITE),
    },
}
# fixture -> (operator label, line) places that must stay sites next to the rejected ones.
KEPT = {
    "eval_loader.py": {("no_shuffle", 35), ("change_batch_size", 35)},
    "gelu_mlp.py": {("drop_activation", 24)},
    "reinforce.py": {("drop_input_normalization", 25)},
    "loss_module_names.py": {("reduction_sum", 8), ("reduction_sum", 9)},
    # The batch size also sizes the hidden state (line 57): it changes where it is
    # configured, so both agree (issue 29; the loader's own argument was rejected before).
    "rnn_step_function.py": {("optimizer_partial_params", 56), ("change_batch_size", 47)},
    "full_batch_logreg.py": {("change_batch_size(factor=0.125)", 13)},
}


def _survey(path: Path):
    return SourceFile.from_path(str(path)).survey(all_variants())


def test_every_fixture_is_pinned():
    assert {p.name for p in GATE.glob("*.py")} == set(REJECTED)


@pytest.mark.parametrize("fixture", sorted(REJECTED))
def test_fixture_rejects_exactly_the_false_places(fixture: str):
    """Places outside an operator's contexts (check ``context``) are listed too; they are
    pinned apart (``test_places_outside_an_operators_contexts_are_listed``)."""
    survey = _survey(GATE / fixture)
    found = {
        (r.site.operator.label, r.site.line, r.check)
        for r in survey.rejected
        if r.check != OFF_CONTEXT
    }
    assert found == REJECTED[fixture]
    sites = {(s.operator.label, s.line) for s in survey.sites}
    assert KEPT.get(fixture, set()) <= sites
    assert not {(label, line) for label, line, _ in found} & sites


def test_a_loss_module_named_like_a_function_gets_no_keyword_at_its_call():
    """``mse_loss = nn.MSELoss()``: ``mse_loss(pred, y)`` is a module call, not F.mse_loss."""
    survey = _survey(GATE / "loss_module_names.py")
    lines = {s.line for s in survey.sites if s.operator.name == "reduction_sum"}
    assert lines == {8, 9}  # the constructors, never the call on line 17


def test_reasons_say_what_is_wrong():
    by_key = {
        (r.site.operator.label, r.site.line): r.reason
        for fixture in REJECTED
        for r in _survey(GATE / fixture).rejected
    }
    assert (
        "`normalize` is not bound in function get_test_loader()"
        in by_key[("augment_validation", 28)]
    )
    assert "negative bound" in by_key[("drop_training_data", 14)]
    assert "estimate_loss()" in by_key[("no_shuffle", 17)]
    assert "no model reads" in by_key[("drop_input_normalization", 39)]
    assert "2 parameter tensors" in by_key[("optimizer_partial_params", 16)]


def test_rejected_places_keep_their_ordinals():
    """The gate never renames a mutant: a rejected place still counts in its function."""
    survey = _survey(GATE / "eval_loader.py")
    identities = [s.identity for s in survey.sites if s.operator.label == "no_shuffle"]
    rejected = [r.site.identity for r in survey.rejected if r.site.operator.label == "no_shuffle"]
    assert rejected == ["eval_loader.py::estimate_loss::no_shuffle#0"]
    assert identities == ["eval_loader.py::main::no_shuffle#0"]
    assert SourceFile.from_path(str(GATE / "eval_loader.py")).find_sites(all_variants())


def test_every_check_names_its_runtime_errors():
    checks = {r.check for fixture in REJECTED for r in _survey(GATE / fixture).rejected}
    assert checks <= set(STILLBORN_ERRORS)
    assert STILLBORN_ERRORS["unbound_name"] == ("NameError", "UnboundLocalError")


# -- each check on its own, with operators made for the test ---------------------------------


class AddCounterpart(Swap):
    """Test operator: ``val_x`` -> ``train_x`` wherever it is read."""

    name = "test_add_counterpart"
    category = "data"
    summary = "test"
    expected = "misleads"
    node_types = (cst.Name,)

    def swap(self, node, ctx):
        read = isinstance(ctx.parent(node), cst.Return)
        return cst.Name("train_x") if read and node.value == "val_x" else None


class AddReduction(Swap):
    """Test operator: ``reduction="sum"`` on any call of ``criterion``."""

    name = "test_add_reduction"
    category = "loss"
    summary = "test"
    expected = "degrades"
    node_types = (cst.Call,)

    def swap(self, node, ctx):
        if isinstance(node.func, cst.Name) and node.func.value == "criterion":
            return with_keyword(node, "reduction", parse_expr('"sum"'))
        return None


class ShrinkHead(Swap):
    """Test operator claiming to shrink ``X[:k]``: ``k`` becomes ``int(k * 0.1)``."""

    name = "test_shrink_head"
    category = "data"
    summary = "test"
    expected = "degrades"
    claims = frozenset({"shrinks_slice"})
    node_types = (cst.Slice,)

    def swap(self, node, ctx):
        if node.lower is None and node.upper is not None:
            code = SourceFile("", "x").module.code_for_node(node.upper)
            return node.with_changes(upper=parse_expr(f"int(({code}) * 0.1)"))
        return None


class DropAssignment(Swap):
    """Test operator: delete ``scaler = ...``."""

    name = "test_drop_assignment"
    category = "numerics"
    summary = "test"
    expected = "crash"
    node_types = (cst.SimpleStatementLine,)

    def swap(self, node, ctx):
        assign = node.body[0]
        if isinstance(assign, cst.Assign) and ctx.code(assign.targets[0].target) == "scaler":
            return cst.RemoveFromParent()
        return None


def _checked(source: str, operator) -> tuple[list[str], list[Rejected]]:
    survey = SourceFile(source, "t.py").survey([operator])
    return [s.identity for s in survey.sites], survey.rejected


def test_unbound_name_rejects_a_name_of_another_function():
    source = "def main():\n    train_x = 1\n\n\ndef evaluate():\n    return val_x\n\n\nval_x = 2\n"
    sites, rejected = _checked(source, AddCounterpart())
    assert sites == [] and [r.check for r in rejected] == ["unbound_name"]
    assert "`train_x` is not bound in function evaluate()" in rejected[0].reason


@pytest.mark.parametrize(
    "source",
    [
        "train_x = 1\n\n\ndef evaluate():\n    return val_x\n",  # a global
        "def evaluate(train_x):\n    return val_x\n",  # a parameter
        "def evaluate():\n    print(train_x)\n    return val_x\n",  # the original reads it unbound
        "from data import *\n\n\ndef evaluate():\n    return val_x\n",  # a star import
    ],
    ids=["global", "parameter", "free-in-original", "star-import"],
)
def test_unbound_name_lets_bound_or_unknowable_names_through(source):
    sites, rejected = _checked(source, AddCounterpart())
    assert len(sites) == 1 and rejected == []


def test_unbound_name_rejects_removing_the_only_binding_still_read():
    source = "scaler = make()\nscaler.step()\n"
    sites, rejected = _checked(source, DropAssignment())
    assert sites == [] and "only binding of `scaler`" in rejected[0].reason
    bound_twice = "scaler = make()\nscaler = make()\nscaler.step()\n"
    assert len(_checked(bound_twice, DropAssignment())[0]) == 2


class RenameImport(Swap):
    """Bug: imports another name. Impact: none. Fix: none. Check: none."""

    name = "test_rename_import"
    category = "numerics"
    summary = "imports another name"
    expected = "silent"
    node_types = (cst.ImportAlias,)

    def swap(self, node, ctx):
        if not (isinstance(node.name, cst.Name) and node.name.value == "MLP"):
            return None
        return node.with_changes(name=cst.Name("MLPX"), asname=cst.AsName(name=cst.Name("MLP")))


def test_an_imported_name_is_no_variable_read():
    """``from m import MLPX as MLP`` reads no unbound name ``MLPX``: an imported name is an
    attribute of the module (whether ``m`` has it, only running it tells: a stillborn run)."""
    source = "from model import MLP\n\nnet = MLP()\n"
    sites, rejected = _checked(source, RenameImport())
    assert len(sites) == 1 and rejected == []


def test_call_keyword_rejects_a_loss_module_call_and_accepts_what_forward_takes():
    built = "import torch.nn as nn\ncriterion = nn.MSELoss()\nloss = criterion(p, y)\n"
    sites, rejected = _checked(built, AddReduction())
    assert sites == [] and rejected[0].check == "call_keyword"
    own = (
        "import torch.nn as nn\n\n\nclass Loss(nn.Module):\n"
        "    def forward(self, p, y, reduction='mean'):\n        return p\n\n\n"
        "criterion = Loss()\nloss = criterion(p, y)\n"
    )
    assert len(_checked(own, AddReduction())[0]) == 1
    unknown = "from losses import make\ncriterion = make()\nloss = criterion(p, y)\n"
    assert len(_checked(unknown, AddReduction())[0]) == 1  # nothing says it cannot


@pytest.mark.parametrize(
    ("bound", "rejected"),
    [("-n_test", True), ("n - n_val", False), ("400", False), ("len(X) - 10", False)],
)
def test_slice_direction_follows_negative_bounds(bound, rejected):
    sites, found = _checked(f"train = X[:{bound}]\n", ShrinkHead())
    assert (found != []) is rejected and (sites == []) is rejected
    if rejected:
        assert found[0].check == "slice_direction"


def test_mutate_list_rejected_prints_flake8_lines(capsys):
    path = str(GATE / "negative_split.py")
    code = main(["mutate", path, "--operator", "drop_training_data", "--list", "--rejected"])
    out, err = capsys.readouterr()
    assert code == 0 and "0 mutants, 1 rejected" in err
    assert out.strip() == (
        f"{path}:14:31 drop_training_data "
        "negative_split.py::train_test_split::drop_training_data#0 REJECTED: the slice "
        "[:-num_tests] keeps as many rows or more after the edit ([:int((-num_tests) * 0.1)]): "
        "a negative bound counts from the end"
    )


def test_mutate_rejected_takes_no_diff_or_out(capsys, tmp_path):
    code = main(["mutate", str(GATE / "negative_split.py"), "--diff", "--rejected"])
    _, err = capsys.readouterr()
    assert code == 2 and "--rejected" in err and "Traceback" not in err
    files = [str(GATE / "negative_split.py"), str(GATE / "reinforce.py")]
    code = main(["mutate", *files, "--out", str(tmp_path / "out"), "--rejected"])
    _, err = capsys.readouterr()
    assert code == 2 and "--rejected" in err and not (tmp_path / "out").exists()


def test_places_outside_an_operators_contexts_are_listed_with_the_reason():
    """A loss operator's place in an evaluation helper (its contexts leave evaluation out)
    is no site, and ``--rejected`` says why instead of dropping it (issue 29)."""
    survey = _survey(GATE / "eval_loader.py")
    off = {
        (r.site.operator.label, r.site.line): r.reason
        for r in survey.rejected
        if r.check == OFF_CONTEXT
    }
    assert (
        off[("reduction_sum", 23)] == "in eval code: this bug belongs to train, setup, unknown code"
    )
    assert ("drop_input_to_device", 23) not in off  # its contexts include evaluation
    assert not set(off) & {(s.operator.label, s.line) for s in survey.sites}
