"""Where a training batch size is set, and what else it sizes (private to ``change_batch_size``).

A batch size read by the training DataLoader may also size other code: labels built for a
batch (``torch.ones(opt.batch_size, 1)``), a hidden state, a loop over a batch's rows. The
bug ``change_batch_size`` names is the *configured* size changed with nothing retuned, so
when such code meets the training batch the site is where the size is configured (an
argparse default, a config field, a module constant): every reader then agrees. Only where
that place is not in the script, or the same value also tunes the learning rate (changing
it there would retune), is the loader's size no site: the mutant would fail on a shape.
Code that never meets the training batch (a noise tensor that only feeds sample images)
stops nothing (issue 29).
"""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.semantics import (
    compact_code,
    find_arg,
    has_star_args,
    hyperparameter_constants,
    is_data_loader,
    is_training_loader,
    is_true,
    method_name,
    number_value,
    optimizer_class,
    per_module,
    receiving_name,
    resolve,
    same_scope,
    site_context,
    values_of,
)
from mutator.semantics.config import config_settings, reads_field
from mutator.semantics.data import forwarded_loader_argument
from mutator.semantics.hyperparams import kind_of
from mutator.semantics.optim import constructor_kind
from mutator.semantics.syntax import dotted_name

# Calls whose arguments are tensor shapes: a batch size among them fixes the batch dimension.
_SHAPE_METHODS = frozenset({"view", "reshape", "expand", "new_zeros", "new_ones", "new_empty"})
_SHAPE_METHODS |= frozenset({"init_hidden", "init_hidden_state", "initHidden"})
# Contexts whose tensors never meet a training batch.
_APART = frozenset({"plot", "export", "eval"})


def loader_batch_size(node: cst.CSTNode, ctx: Context) -> cst.Arg | None:
    """The ``batch_size`` argument of a training DataLoader whose arguments are all visible,
    or of a call of the script's own helper that builds one (``make_loader(train_set, 32)``)."""
    if not isinstance(node, cst.Call) or has_star_args(node):
        return None
    if not is_data_loader(node, ctx):
        size = forwarded_loader_argument(node, "batch_size", ctx)
        if size is None or not is_training_loader(node, ctx):
            return None
        # ``get_loader(..., args.batch_size)``: the configured value is the one site (a
        # helper is no DataLoader that takes the setting over; issue 29).
        configured = any(
            reads_field(size.value, s.field, ctx) for s in config_settings(ctx, "batch_size")
        )
        return None if configured else size
    size = find_arg(node, "batch_size", 1)
    if size is None or (isinstance(size.value, cst.Name) and size.value.value == "None"):
        return None
    return size if is_training_loader(node, ctx) else None


def sized_by(size: cst.BaseExpression, ctx: Context) -> list[cst.Call]:
    """Tensor factories, reshapes and ``range`` loops given the same batch-size expression
    (``torch.zeros(1, batch_size, hidden)``): scaling the loader's batch alone changes what
    they assume."""
    if number_value(size) is not None:
        return []
    key = compact_code(size)
    found = []
    for call in ctx.nodes(cst.Call):
        if not any(compact_code(arg.value) == key for arg in call.args):  # type: ignore[attr-defined]
            continue
        shaped = method_name(call) in _SHAPE_METHODS  # type: ignore[arg-type]
        shaped = shaped or resolve(call, ctx, strict=False).under("torch")
        shaped = shaped or resolve(call, ctx, strict=False).matches({"builtins.range"})
        if shaped and not is_data_loader(call, ctx):
            found.append(call)  # type: ignore[arg-type]
    return found


def meets_training(call: cst.Call, ctx: Context) -> bool:
    """Can what ``call`` builds meet a training batch? No only when it is bound to a name
    that nothing reads or that only plotting, export or evaluation code reads."""
    if site_context(call, ctx) == "train":
        return True
    name = receiving_name(call, ctx)
    if name is None:
        return site_context(call, ctx) not in _APART  # returned or handed on: it may
    kind = cst.Attribute if "." in name else cst.Name
    reads = [
        node
        for node in ctx.nodes(kind)
        if dotted_name(node) == name  # type: ignore[arg-type]
        and not isinstance(ctx.parent(node), cst.AssignTarget)
        and same_scope(node, call, ctx)
    ]
    return any(site_context(node, ctx) not in _APART for node in reads)


def configured_at(size: cst.BaseExpression, ctx: Context) -> cst.CSTNode | None:
    """The node that sets the batch size ``size`` reads: a module-level constant
    (``batch_size = 64``) or a config value (``--batch_size`` default, ``cfg.batch_size``)."""
    if isinstance(size, cst.Name):
        for constant in hyperparameter_constants(ctx, "batch_size"):
            if dotted_name(constant.targets[0].target) == size.value:
                return constant
        return None
    settings = [s for s in config_settings(ctx, "batch_size") if reads_field(size, s.field, ctx)]
    return settings[0].node if len(settings) == 1 else None


def _retunes(size: cst.BaseExpression, ctx: Context) -> bool:
    """Does the same value also set a learning rate, a decay or an optimizer's argument
    (``lr = base_lr * batch_size / 256``)? Changing it where it is set would retune them."""
    key = compact_code(size)
    for node in ctx.nodes(type(size)):
        if node is size or compact_code(node) != key:  # type: ignore[arg-type]
            continue
        for ancestor in ctx.ancestors(node):
            if isinstance(ancestor, cst.Call) and (
                optimizer_class(ancestor, ctx) or constructor_kind(ancestor, ctx) == "scheduler"
            ):
                return True
            if isinstance(ancestor, cst.Assign):
                names = [dotted_name(t.target) or "" for t in ancestor.targets]
                if any(kind_of(n.rsplit(".", 1)[-1]) in ("lr", "weight_decay") for n in names):
                    return True
                break
            if isinstance(ancestor, cst.BaseStatement):
                break
    return False


def shape_conflict(size: cst.BaseExpression, ctx: Context) -> cst.Call | None:
    """The first code sized by ``size`` that meets the training batch, if any."""
    return next((call for call in sized_by(size, ctx) if meets_training(call, ctx)), None)


def configured_site(size: cst.BaseExpression, ctx: Context) -> cst.CSTNode | None:
    """Where to change a loader's batch size that also sizes code meeting the training
    batch: the place it is configured, when the script shows it and nothing there is tuned
    from it; None when the loader's own argument is the site or there is no site."""
    if shape_conflict(size, ctx) is None or _retunes(size, ctx):
        return None
    return configured_at(size, ctx)


@per_module
def deferred_settings(ctx: Context) -> list[cst.CSTNode]:
    """Configured batch sizes that are the site in place of a training loader's argument."""
    found = []
    for call in ctx.nodes(cst.Call):
        size = loader_batch_size(call, ctx)
        place = configured_site(size.value, ctx) if size is not None else None
        if place is not None and all(place is not other for other in found):
            found.append(place)
    return found


def drops_last(loader: cst.Call) -> bool:
    flag = find_arg(loader, "drop_last")
    return flag is not None and is_true(flag.value)


def literal_samples(loader: cst.Call, ctx: Context) -> int | None:
    """How many samples the loader's dataset holds when the script writes them out:
    ``ToyDataset(X_train, y_train)`` with ``X_train = torch.tensor([[...], ...])``."""
    data = find_arg(loader, "dataset", 0)
    if data is None:
        return None
    built = [data.value] if isinstance(data.value, cst.Call) else values_of(data.value, ctx, loader)
    for dataset in built:
        if not isinstance(dataset, cst.Call):
            continue
        for arg in dataset.args:
            held = (
                [arg.value]
                if isinstance(arg.value, cst.Call)
                else values_of(arg.value, ctx, dataset)
            )
            for tensor in held:
                rows = (
                    tensor.args[0].value if isinstance(tensor, cst.Call) and tensor.args else None
                )
                if isinstance(rows, cst.List) and resolve(tensor.func, ctx).matches(
                    ("torch.tensor",)
                ):  # type: ignore[union-attr]
                    return len(rows.elements)
    return None
