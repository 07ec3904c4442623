"""The shared recognisers of ``mutator.semantics``, one question at a time, on real parses.

Plus the operator behaviours that follow from sharing them (a script's own ``Adam`` class
is no optimizer, ``set_grad_enabled(False)`` is a no-grad block, ...).
"""

from __future__ import annotations

import libcst as cst
import pytest

from mutations.registry import get_operator
from mutator import SourceFile
from mutator import semantics as p
from mutator.context import Context


def parsed(source: str) -> Context:
    return SourceFile(source, "t.py").context


def first(ctx: Context, kind: type[cst.CSTNode], code: str | None = None) -> cst.CSTNode:
    """The first node of ``kind`` (whose code is ``code``, if given)."""
    return next(n for n in ctx.nodes(kind) if code is None or ctx.code(n) == code)


def site_names(source: str, *operators: str) -> list[str]:
    found = SourceFile(source, "t.py").find_sites([get_operator(name) for name in operators])
    return [site.operator.name for site in found]


# -- literals and small edits -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "integer", "code"),
    [
        (0.1, None, "0.1"),
        (1e-8, None, "1e-8"),
        (1e-16, None, "1e-16"),
        (512, None, "512"),
        (10.0, None, "10.0"),
        (5e-4 * 100, None, "0.05"),  # 0.05000000000000001 as typed by a person
        (-1, None, "-1"),
        (-0.5, None, "-0.5"),
        (64 * 0.125, True, "8"),
        (1e20, False, "1e20"),
    ],
)
def test_number_literal_reads_as_typed(value, integer, code):
    literal = p.number_literal(value, integer)
    assert p.code_of(literal) == code
    assert p.number_value(literal) == pytest.approx(value)


def test_argument_removal_keeps_a_one_per_line_layout():
    call = cst.parse_expression("nn.Sequential(\n    a,\n    b,\n)")
    assert isinstance(call, cst.Call)
    assert p.code_of(p.without_element(call, call.args[1])) == "nn.Sequential(\n    a,\n)"
    assert p.code_of(p.without_arg(call, call.args[1])) == "nn.Sequential(\n    a)"


def test_tuple_element_removal_leaves_a_lone_value_bare():
    pair = cst.parse_expression("(x.to(d), y.to(d))")
    assert isinstance(pair, cst.Tuple)
    assert p.code_of(p.without_tuple_element(pair, 0)) == "y.to(d)"


def test_receivers_and_factors_are_parenthesised_only_when_needed():
    assert p.code_of(p.method_call(cst.parse_expression("a + b"), "sum")) == "(a + b).sum()"
    assert p.code_of(p.method_call(cst.parse_expression("a[0]"), "sum")) == "a[0].sum()"
    assert p.code_of(p.as_factor(cst.parse_expression("a + b"))) == "(a + b)"
    assert p.code_of(p.as_factor(cst.parse_expression("a / b"))) == "a / b"


@pytest.mark.parametrize(
    ("code", "pure"),
    [
        ("y_train", True),
        ("X[:, -1]", True),
        ("perm[: n_train]", True),
        ("logits.view(-1, logits.size(-1))", True),
        ("y.long()", True),
        ("model(x)", False),
        ("next(it)", False),
        ("y[idx()]", False),
    ],
)
def test_is_pure_means_safe_to_repeat(code, pure):
    assert p.is_pure(cst.parse_expression(code)) is pure


# -- names and imports --------------------------------------------------------------------------


def test_strict_resolution_knows_star_imports_and_the_scripts_own_classes():
    ctx = parsed("from torch.nn import *\nclass Net:\n    pass\nNet()\nCrossEntropyLoss()\n")
    own, star = (first(ctx, cst.Call, code) for code in ("Net()", "CrossEntropyLoss()"))
    assert p.resolve(own.func, ctx).names == {"<local>.Net"}  # type: ignore[attr-defined]
    assert p.resolve(star, ctx).names == {"torch.nn.CrossEntropyLoss"}
    # Imports only: neither is explained, so the last name decides a match.
    assert p.resolve(own, ctx, strict=False).names == frozenset()
    assert p.resolve(star, ctx, strict=False).matches({"torch.nn.CrossEntropyLoss"})


def test_strict_resolution_never_guesses_from_self_attributes():
    ctx = parsed("self.cross_entropy(a, b)\n")
    call = first(ctx, cst.Call)
    wanted = {"torch.nn.functional.cross_entropy"}
    assert p.resolve(call, ctx, strict=False).matches(wanted)
    assert not p.resolve(call, ctx).matches(wanted)


def test_resolution_prefers_imports_and_tests_prefixes():
    ctx = parsed("import torch\nfrom . import helpers\nx = torch.long\nhelpers.f()\nlen(x)\n")
    dtype = first(ctx, cst.Attribute, "torch.long")
    assert p.resolve(dtype, ctx).under("torch")
    assert not p.resolve(dtype, ctx).under("torc")
    assert p.resolve(first(ctx, cst.Call, "helpers.f()"), ctx).names == {"..helpers.f"}
    assert p.resolve(first(ctx, cst.Call, "len(x)"), ctx).names == {"builtins.len"}


@pytest.mark.parametrize(
    ("source", "module", "spelling"),
    [
        ("import torch.nn.functional as F\nimport torch\n", "torch.nn.functional", "F"),
        ("from torch import nn\n", "torch.nn.functional", "nn.functional"),
        ("import torch.nn as nn\n", "torch", None),  # ``torch`` itself is not bound
        ("def f():\n    import torch\n", "torch", None),  # not at module level
    ],
)
def test_module_alias_spells_a_module_as_the_script_does(source, module, spelling):
    assert p.module_alias(parsed(source), module) == spelling


def test_module_alias_sees_the_imports_of_the_function_at_hand():
    ctx = parsed("def f():\n    import torch as th\n    y = 1\n")
    assert p.module_alias(ctx, "torch", at=first(ctx, cst.Assign)) == "th"


@pytest.mark.parametrize(
    ("source", "new_first", "expected"),
    [
        ("from torch.optim import AdamW\nAdamW(p)\n", False, "from torch.optim import AdamW, Adam"),
        ("from torch.optim import AdamW\nAdamW(p)\n", True, "from torch.optim import Adam, AdamW"),
    ],
)
def test_renamed_callee_adds_the_import_it_needs(source, new_first, expected):
    ctx = parsed(source)
    call = first(ctx, cst.Call)
    callee, edits = p.renamed_callee(call.func, ctx, "Adam", new_first=new_first)  # type: ignore[attr-defined, misc]
    assert p.code_of(callee) == "Adam"
    assert [p.code_of(edit) for edit in edits.values()] == [expected]  # type: ignore[arg-type]


def test_renamed_callee_reuses_an_existing_import_and_refuses_to_guess():
    ctx = parsed("from torch.optim import Adam, AdamW as W\nW(p)\nmystery(p)\n")
    imported, unknown = (first(ctx, cst.Call, code) for code in ("W(p)", "mystery(p)"))
    assert p.renamed_callee(imported.func, ctx, "Adam") is not None  # type: ignore[attr-defined]
    callee, edits = p.renamed_callee(imported.func, ctx, "Adam")  # type: ignore[attr-defined, misc]
    assert (p.code_of(callee), edits) == ("Adam", {})
    assert p.renamed_callee(unknown.func, ctx, "Adam") is None  # type: ignore[attr-defined]


# -- values, kinds, roles -----------------------------------------------------------------------


def test_values_of_follow_a_parameter_into_self():
    ctx = parsed(
        "from torch import nn\nclass T:\n    def __init__(self, criterion):\n"
        "        self.criterion = criterion\n    def step(self, a, b):\n"
        "        return self.criterion(a, b)\nT(nn.MSELoss())\n"
    )
    use = first(ctx, cst.Call, "self.criterion(a, b)")
    values = p.values_of(use.func, ctx, use)  # type: ignore[attr-defined]
    assert [p.code_of(value) for value in values] == ["nn.MSELoss()"]
    assert p.loss_call_kind(use, ctx) == "MSELoss"


@pytest.mark.parametrize(
    ("source", "kind"),
    [
        ("import torch\nx = torch.optim.SGD(ps, lr=0.1)\n", "optimizer"),
        ("from torch.optim.lr_scheduler import StepLR as Decay\nx = Decay(opt, 3)\n", "scheduler"),
        ("from timm.scheduler import CosineLRScheduler\nx = CosineLRScheduler(opt)\n", "scheduler"),
        ("import torch\nx = torch.cuda.amp.GradScaler()\n", "scaler"),
        ("from torch.optim import Optimizer\ndef f(x: Optimizer):\n    pass\n", "optimizer"),
        ("x = make()\n", None),
    ],
)
def test_receiver_kind_from_construction_annotation_or_nothing(source, kind):
    ctx = parsed(source + "x.step()\n")
    assert p.receiver_kind(first(ctx, cst.Call, "x.step()").func.value, ctx) == kind  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("name", "kind"), [("lr_sched", "scheduler"), ("opt", "optimizer"), ("scaler", "scaler")]
)
def test_receiver_kind_falls_back_to_the_name(name, kind):
    ctx = parsed(f"{name}.step()\n")
    assert p.receiver_kind(first(ctx, cst.Call).func.value, ctx) == kind  # type: ignore[attr-defined]


def test_optimizer_class_ignores_the_scripts_own_look_alike():
    ctx = parsed("import torch\nclass Adam:\n    pass\nAdam(ps)\ntorch.optim.Adam(ps)\n")
    own, torch_adam = (first(ctx, cst.Call, code) for code in ("Adam(ps)", "torch.optim.Adam(ps)"))
    assert p.optimizer_class(own, ctx) is None
    assert p.optimizer_class(torch_adam, ctx) == "Adam"


@pytest.mark.parametrize(
    ("source", "verdict"),
    [
        ("import torch.nn as nn\nclass Net(nn.Module):\n    pass\nmodel = Net().to(d)\n", True),
        ("import lightning as L\nclass Lit(L.LightningModule):\n    pass\nmodel = Lit()\n", True),
        ("class Trainer:\n    pass\nmodel = Trainer()\n", False),
        ("model = build(cfg)\n", True),  # nothing tells: the name decides
        ("import torch\nmodel = torch.Generator()\n", False),  # resolved, and no module
    ],
)
def test_is_model(source, verdict):
    ctx = parsed(source + "model.train()\n")
    assert p.is_model(first(ctx, cst.Call, "model.train()").func.value, ctx) is verdict  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("name", "role"),
    [
        ("X_val", "eval"),
        ("valLoader", "eval"),
        ("train_ds", "train"),
        ("XTrain", "train"),
        ("tr_te_split", None),
        ("batch", None),
    ],
)
def test_split_role_from_the_words_of_a_name(name, role):
    assert p.split_role(name) == role


@pytest.mark.parametrize(
    ("line", "training"),
    [
        ("train_loader = DataLoader(ds, batch_size=64)", True),
        ("dl = DataLoader(ds, batch_size=64, shuffle=True)", True),
        ("loader = DataLoader(ds, batch_size=args.train_batch_size)", True),
        ("val_loader = DataLoader(train_ds, batch_size=256)", False),  # bound name first
        ("test_loader = DataLoader(test_ds, shuffle=True)", False),
        ("dl = DataLoader(ds, batch_size=64)", False),  # nothing says training
    ],
)
def test_is_training_loader(line, training):
    ctx = parsed(f"from torch.utils.data import DataLoader\n{line}\n")
    assert p.is_training_loader(first(ctx, cst.Call), ctx) is training


@pytest.mark.parametrize(
    ("block", "inside"),
    [
        ("with torch.no_grad():", True),
        ("with torch.set_grad_enabled(False):", True),
        ("with torch.set_grad_enabled(True):", False),
        ("with torch.inference_mode():", True),
        ("with torch.inference_mode(False):", False),
        ("with open(path):", False),
        # The innermost switch decides; inference_mode(False) does not re-enable gradients.
        ("with torch.no_grad():\n  with torch.enable_grad():", False),
        ("with torch.no_grad():\n  with torch.set_grad_enabled(True):", False),
        ("with torch.no_grad():\n  with torch.inference_mode(False):", True),
        ("with torch.enable_grad():\n  with torch.set_grad_enabled(False):", True),
        ("with torch.no_grad(), torch.enable_grad():", False),
    ],
)
def test_in_no_grad(block, inside):
    ctx = parsed(f"import torch\n{block}\n    y = model(x)\n")
    assert p.in_no_grad(first(ctx, cst.Assign), ctx) is inside


def test_grad_mode_decorators():
    ctx = parsed(
        "import torch\n@torch.no_grad\ndef a():\n    y = 1\n"
        "@torch.no_grad()\n@torch.enable_grad()\ndef b():\n    z = 1\n"
    )
    assigns = ctx.nodes(cst.Assign)
    assert p.in_no_grad(assigns[0], ctx)
    assert not p.in_no_grad(assigns[1], ctx)


# -- caches -------------------------------------------------------------------------------------


def test_per_module_runs_once_per_parsed_module():
    calls = []

    @p.per_module
    def count_calls(ctx: Context) -> int:
        calls.append(ctx)
        return len(ctx.nodes(cst.Call))

    one, other = parsed("f()\ng()\n"), parsed("f()\n")
    assert [count_calls(one), count_calls(one), count_calls(other)] == [2, 2, 1]
    assert calls == [one, other]


def test_per_node_remembers_each_node_separately():
    seen = []

    @p.per_node
    def callee(node: cst.Call, ctx: Context) -> str | None:
        seen.append(node)
        return p.callee_name(node)

    ctx = parsed("f()\ng()\n")
    calls = ctx.nodes(cst.Call)
    assert [callee(call, ctx) for call in calls * 2] == ["f", "g", "f", "g"]
    assert seen == calls


# -- what sharing the recognisers means for the operators ---------------------------------------


def test_a_scripts_own_adam_class_is_left_alone():
    source = "class Adam:\n    def __init__(self, params, lr=1e-3):\n        pass\n"
    source += "opt = Adam(model.parameters(), lr=1e-3)\n"
    assert site_names(source, "scale_lr", "adam_eps_too_small", "sgd_instead_of_adam") == []


def test_set_grad_enabled_false_protects_the_loss_like_no_grad():
    source = (
        "import torch\nfor x, y in loader:\n    with torch.set_grad_enabled(False):\n"
        "        val_loss = criterion(model(x), y)\n    loss = criterion(model(x), y)\n"
        "    loss.backward()\n"
    )
    sites = SourceFile(source, "t.py").find_sites([get_operator("loss_from_item")])
    assert [site.line for site in sites] == [5]


def test_label_rewrites_need_torch_itself_bound():
    source = "import torch.nn as nn\nds = TensorDataset(X_train, y_train)\ncrit = nn.CrossEntropyLoss()\n"
    assert site_names(source, "shuffle_labels", "label_noise") == []
    with_torch = "import torch\n" + source
    assert site_names(with_torch, "shuffle_labels", "label_noise") == [
        "shuffle_labels",
        "label_noise",
    ]


def test_schedulers_are_known_by_annotation_and_by_factory_name():
    annotated = (
        "from torch.optim.lr_scheduler import LRScheduler\n"
        "def fit(opt, s: LRScheduler):\n    for epoch in range(3):\n        train(opt)\n"
        "        s.step()\n"
    )
    assert site_names(annotated, "drop_scheduler_step") == ["drop_scheduler_step"]
    resumed = (
        "from transformers import get_cosine_schedule_with_warmup\n"
        "warm = get_cosine_schedule_with_warmup(opt, 10, 100)\nwarm.load_state_dict(ckpt['s'])\n"
    )
    assert site_names(resumed, "drop_load_state_dict", "drop_scheduler_state_on_resume") == [
        "drop_scheduler_state_on_resume"
    ]
