"""The ``optimizer_on_stale_model`` operator (OptimizerOnStaleModel)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Edits, Example, NonSite, Operator
from mutator.semantics import (
    MODULE_PASSTHROUGH,
    bound_names,
    code_of,
    expression_call,
    mentions,
    method_name,
    optimizer_class,
    receiver,
    single_assignment,
)
from mutator.semantics.params import parameter_owners, root_name


def _optimized_model(value: cst.BaseExpression, ctx: Context) -> str | None:
    """The model name whose parameters an optimizer is built on: ``Adam(model.parameters())``
    or ``model.configure_optimizers(...)``; else None."""
    if not isinstance(value, cst.Call):
        return None
    if method_name(value) == "configure_optimizers":
        owner = receiver(value)
        return owner.value if isinstance(owner, cst.Name) else None
    if optimizer_class(value, ctx) is None or not value.args:
        return None
    params = value.args[0].value
    if isinstance(params, cst.Call) and method_name(params) == "parameters":
        owner = receiver(params)
        return owner.value if isinstance(owner, cst.Name) else None
    # Parameter groups or lists of one model's parts (``dict(params=model.conv1.parameters(),
    # ...)``, issue 29): that model.
    owners = parameter_owners(value, ctx)
    roots = {root_name(owner) for owner in owners} if owners else set()
    return roots.pop() if len(roots) == 1 and None not in roots else None


class OptimizerOnStaleModel(Operator):
    """Re-create the model right after the optimizer was built on its parameters.

    Bug: the model is (re)built after the optimizer took its parameters: a second
    ``model = Net()`` (a reset for a new fold, a copied setup block, a wrap that builds a
    new module). Impact: the optimizer steps the parameters of the old, unused model;
    the one that is trained and evaluated gets gradients that no optimizer applies: the
    loss stays at its initial level, no error. The new model repeats what followed the
    constructor before the optimizer (``model.to(device)``, a DataParallel wrap), so it
    lives where the original did. Fix: build the optimizer after the final model exists (and after ``.to(device)``), or rebuild it whenever the model is.
    Check: ``{id(p) for g in opt.param_groups for p in g["params"]}`` equals
    ``{id(p) for p in model.parameters()}``; the weights change after a step.
    """

    name = "optimizer_on_stale_model"
    category = "optim"
    summary = "Re-create the model after its optimizer is built: the trained model never updates."
    expected = "breaks_training"
    witness = "more foreign_grads", "the trained model's parameters are not in the optimizer"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="""
                model = Net().to(device)
                optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
                train(model, optimizer)
            """,
            after="""
                model = Net().to(device)
                optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
                model = Net().to(device)
                train(model, optimizer)
            """,
        ),
        Example(
            before="""
                model = GPT(config)
                model.to(device)
                optimizer = model.configure_optimizers(weight_decay, learning_rate)
            """,
            after="""
                model = GPT(config)
                model.to(device)
                optimizer = model.configure_optimizers(weight_decay, learning_rate)
                model = GPT(config)
                model.to(device)
            """,
        ),
        Example(
            before="""
                model = models.__dict__[args.arch]()
                model = torch.nn.DataParallel(model).cuda()
                optimizer = torch.optim.SGD(model.parameters(), args.lr)
            """,
            after="""
                model = models.__dict__[args.arch]()
                model = torch.nn.DataParallel(model).cuda()
                optimizer = torch.optim.SGD(model.parameters(), args.lr)
                model = models.__dict__[args.arch]()
                model = torch.nn.DataParallel(model).cuda()
            """,
        ),
        # A conditional move or wrap is repeated too (issue 29).
        Example(
            before="""
                model = Net()
                if args.cuda:
                    model = nn.DataParallel(model).cuda()
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            """,
            after="""
                model = Net()
                if args.cuda:
                    model = nn.DataParallel(model).cuda()
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                model = Net()
                if args.cuda:
                    model = nn.DataParallel(model).cuda()
            """,
        ),
        # Parameter groups of one model's layers (issue 29: PyG's GCN example).
        Example(
            before="""
                model = GCN(16, 7).to(device)
                optimizer = torch.optim.Adam([
                    dict(params=model.conv1.parameters(), weight_decay=5e-4),
                    dict(params=model.conv2.parameters(), weight_decay=0)
                ], lr=0.01)
            """,
            after="""
                model = GCN(16, 7).to(device)
                optimizer = torch.optim.Adam([
                    dict(params=model.conv1.parameters(), weight_decay=5e-4),
                    dict(params=model.conv2.parameters(), weight_decay=0)
                ], lr=0.01)
                model = GCN(16, 7).to(device)
            """,
        ),
    )
    non_examples = (
        # The model comes from elsewhere (a parameter): no constructor to repeat.
        """
            def fit(model):
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        """,
        # Parameter groups: the model's parameters are read elsewhere.
        """
            model = Net()
            optimizer = torch.optim.AdamW(groups, lr=1e-3)
        """,
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | NonSite | None:
        assign = single_assignment(node)
        model = _optimized_model(assign.value, ctx) if assign is not None else None
        if model is None:
            return None
        # The constructor and what followed it before the optimizer (``model.to(device)``,
        # ``model = model.cuda()``, a DataParallel wrap): the new model must be the old one's
        # twin on the same device (issue 29: re-created on the CPU, it crashed at the forward).
        again: list[cst.BaseStatement] = []
        for previous in reversed(ctx.preceding_statements(node)):
            built = single_assignment(previous)
            if built is None or model not in set(bound_names(built.targets[0].target)):
                if _moves(previous, model) or _moves_in_branch(previous, model, ctx):
                    again.insert(0, previous)
                continue
            if not isinstance(built.targets[0].target, cst.Name) or not isinstance(
                built.value, cst.Call
            ):
                return NonSite(
                    f"`{code_of(previous)}` cannot be built again the same way (unpacked, "
                    "or not a constructor)"
                )
            again.insert(0, previous)
            if not mentions(built.value, model, ctx):  # the constructor itself
                copies = [statement.with_changes(leading_lines=()) for statement in again]
                return {node: cst.FlattenSentinel([node, *copies])}
        return None


def _rewraps(statement: cst.CSTNode, model: str, ctx: Context) -> bool:
    """``model = model.cuda()``, ``model = DDP(model, ...)``: the model re-bound to itself,
    moved or wrapped."""
    built = single_assignment(statement)
    return (
        built is not None
        and isinstance(built.targets[0].target, cst.Name)
        and built.targets[0].target.value == model
        and mentions(built.value, model, ctx)
    )


def _moves_in_branch(statement: cst.CSTNode, model: str, ctx: Context) -> bool:
    """``if args.cuda: model.cuda()`` (or a wrap, with ``elif``/``else`` branches doing the
    same): a conditional move or wrap of the model, and nothing else (issue 29)."""
    if not isinstance(statement, cst.If):
        return False
    branches: list[cst.BaseSuite] = []
    current: cst.If | cst.Else | None = statement
    while current is not None:
        branches.append(current.body)
        current = current.orelse if isinstance(current, cst.If) else None
    lines = [line for branch in branches for line in getattr(branch, "body", ())]
    return bool(lines) and all(_moves(line, model) or _rewraps(line, model, ctx) for line in lines)


def _moves(statement: cst.CSTNode, model: str) -> bool:
    """``model.to(device)``, ``model.cuda()``: a call that changes the model in place."""
    call = expression_call(statement)
    if call is None or not isinstance(call.func, cst.Attribute):
        return False
    owner = receiver(call)
    return (
        isinstance(owner, cst.Name)
        and owner.value == model
        and method_name(call) in MODULE_PASSTHROUGH
    )
