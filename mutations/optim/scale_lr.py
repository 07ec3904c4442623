"""The ``scale_lr`` operator (ScaleLr)."""

from __future__ import annotations

import libcst as cst

from mutations.optim._shared import DEFAULT_LR, _times, optimizer_call
from mutator.context import Context
from mutator.operator import Edits, Example, NonSite, Param, Replacement, Swap
from mutator.semantics import (
    code_of,
    find_arg,
    hyperparameter_constants,
    manual_lr_writes,
    manual_updates,
    number_literal,
    optimizer_class,
    reads_grad,
    start_of,
    with_arg_value,
    with_keyword,
)
from mutator.semantics.config import config_setting, config_settings, with_setting_value


class ScaleLr(Swap):
    """Multiply the learning rate given to the optimizer by ``factor``.

    Bug: a learning rate off by orders of magnitude (a wrong unit, ``1e-1`` typed for
    ``1e-3``, a value tuned for another optimizer or batch size). Impact: too high (x100)
    and the loss oscillates, spikes or turns NaN within a few steps; too low (x0.01) and
    the loss barely moves for the whole budget, which looks like a model that cannot
    learn. An optimizer without ``lr=`` gets its PyTorch default scaled. Fix: sweep the
    learning rate on a log scale and pick from the early-loss curve; rescale when the
    batch size or optimizer changes. Check: an LR range test, or overfit one batch (too
    low: it does not; too high: it diverges); log the update/weight ratio (~1e-3 is sane).
    """

    name = "scale_lr"
    category = "optim"
    summary = "Multiply the optimizer's learning rate by a factor (x100 by default, or x0.01)."
    expected = "breaks_training"
    witness = "factor optimizer.lr|manual_lr", "the learning rate at the first step is scaled"
    node_types = (cst.Call, cst.Assign, cst.AnnAssign, cst.DictElement, cst.AugAssign)
    parameters = {
        "factor": Param(100.0, "multiplier applied to the learning rate", valid="(0, inf)")
    }
    variants = ({"factor": 0.01},)
    examples = (
        # No optimizer: the module-level constant the hand-written update reads is the lr.
        Example(
            before="""
                lr = 0.05
                for p in model.parameters():
                    p.data.add_(-lr * p.grad)
            """,
            after="""
                lr = 5.0
                for p in model.parameters():
                    p.data.add_(-lr * p.grad)
            """,
        ),
        # ... and where no constant or optimizer sets it (a parameter), the update's step.
        Example(
            before="""
                def sgd_step(params, lr):
                    for p in params:
                        p.data.add_(p.grad, alpha=-lr)
            """,
            after="""
                def sgd_step(params, lr):
                    for p in params:
                        p.data.add_(p.grad, alpha=-lr * 100)
            """,
        ),
        # A file whose only update is ``p -= 0.1 * p.grad``: the rate is the update's own
        # (issue 29).
        Example(
            before="""
                for epoch in range(100):
                    loss.backward()
                    with torch.no_grad():
                        for param in model.parameters():
                            param -= 0.1 * param.grad
            """,
            after="""
                for epoch in range(100):
                    loss.backward()
                    with torch.no_grad():
                        for param in model.parameters():
                            param -= 0.1 * param.grad * 100
            """,
        ),
        # A hand-written schedule overwrites lr= before every step: it is the one site.
        Example(
            before="""
                import torch
                optimizer = torch.optim.AdamW(params, lr=6e-4)
                while True:
                    for param_group in optimizer.param_groups:
                        param_group["lr"] = lr
            """,
            after="""
                import torch
                optimizer = torch.optim.AdamW(params, lr=6e-4)
                while True:
                    for param_group in optimizer.param_groups:
                        param_group["lr"] = lr * 100
            """,
        ),
        # The annealing writes the rate from the config before the first update (issue 22,
        # cleanrl): scaling lr= would change nothing.
        Example(
            before="""
                import torch
                optimizer = torch.optim.Adam(params, lr=args.learning_rate)
                for iteration in range(1, args.num_iterations + 1):
                    optimizer.param_groups[0]["lr"] = frac(iteration) * args.learning_rate
            """,
            after="""
                import torch
                optimizer = torch.optim.Adam(params, lr=args.learning_rate)
                for iteration in range(1, args.num_iterations + 1):
                    optimizer.param_groups[0]["lr"] = frac(iteration) * args.learning_rate * 100
            """,
        ),
        # The current rate rescaled per batch and put back: lr= stays the base (AWD-LSTM).
        Example(
            before="""
                from torch.optim import SGD
                optimizer = SGD(params, lr=30)
                while i < n:
                    lr2 = optimizer.param_groups[0]["lr"]
                    optimizer.param_groups[0]["lr"] = lr2 * seq_len / bptt
            """,
            after="""
                from torch.optim import SGD
                optimizer = SGD(params, lr=3000)
                while i < n:
                    lr2 = optimizer.param_groups[0]["lr"]
                    optimizer.param_groups[0]["lr"] = lr2 * seq_len / bptt
            """,
        ),
        Example(
            before="""
                import torch
                opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            """,
            after="""
                import torch
                opt = torch.optim.Adam(model.parameters(), lr=0.1)
            """,
        ),
        Example(
            before="""
                from torch import optim
                opt = optim.AdamW(params, lr=args.lr)
            """,
            after="""
                from torch import optim
                opt = optim.AdamW(params, lr=args.lr * 100)
            """,
        ),
        Example(
            before="""
                from torch.optim import SGD
                opt = SGD(params, 0.1, momentum=0.9)
            """,
            after="""
                from torch.optim import SGD
                opt = SGD(params, 0.001, momentum=0.9)
            """,
            params={"factor": 0.01},
        ),
        Example(
            before="""
                import torch.optim as optim
                opt = optim.RMSprop(net.parameters())
            """,
            after="""
                import torch.optim as optim
                opt = optim.RMSprop(net.parameters(), lr=1.0)
            """,
        ),
        Example(
            before="""
                import torch
                opt = torch.optim.Adam(ps, lr=base_lr + extra)
            """,
            after="""
                import torch
                opt = torch.optim.Adam(ps, lr=(base_lr + extra) * 0.01)
            """,
            params={"factor": 0.01},
        ),
        # A config object handed to a trainer that builds the optimizer (issue 22).
        Example(
            before="""
                cfg.trainer.lr = 3e-4
                trainer = Trainer(model, cfg)
            """,
            after="""
                cfg.trainer.lr = 0.03
                trainer = Trainer(model, cfg)
            """,
        ),
        # ... or the part of it that holds the setting (issue 29).
        Example(
            before="""
                C = get_config()
                C.trainer.learning_rate = 5e-4
                trainer = Trainer(C.trainer, model, train_dataset)
            """,
            after="""
                C = get_config()
                C.trainer.learning_rate = 0.05
                trainer = Trainer(C.trainer, model, train_dataset)
            """,
        ),
    )
    non_examples = (
        """
            import torch
            sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1)
        """,
        "lr = 1e-3\n",
        """
            import torch
            opt = torch.optim.Adam(model.parameters(), **cfg)
        """,
        "run(model, lr=1e-3)\n",
        # An update that is no step of the parameters: nothing reads a gradient.
        """
            for ema_p, p in zip(ema.parameters(), model.parameters()):
                ema_p.data.mul_(0.99).add_(p.data, alpha=0.01)
        """,
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | NonSite | None:
        updates = manual_updates(ctx)
        if updates and node is _anchor(updates, ctx):
            return self._manual(updates, ctx)
        return super().plan(node, ctx)

    def _manual(self, updates: list[cst.CSTNode], ctx: Context) -> Edits | NonSite | None:
        """Hand-written updates whose rate no constant, config value or optimizer here sets
        (a function's ``lr`` parameter, issue 29): every update's step is scaled."""
        if any(optimizer_class(call, ctx) for call in ctx.nodes(cst.Call)):
            return None
        if hyperparameter_constants(ctx, "lr") or config_settings(ctx, "lr"):
            return None  # the constant or config value is the site
        factor = self.params["factor"]
        edits: Edits = {}
        for update in updates:
            scaled = _scaled_update(update, factor)
            if scaled is None:
                return NonSite(f"`{code_of(update)}`: no step of this update to scale")
            edits[update] = scaled
        return edits

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | NonSite | None:
        setting = config_setting(node, ctx, "lr")
        if setting is not None:
            # ``cfg.trainer.lr = 3e-4`` handed to a trainer that builds the optimizer where
            # the script does not show (issue 22); an optimizer call here is the site.
            if manual_lr_writes(ctx) or any(optimizer_class(c, ctx) for c in ctx.nodes(cst.Call)):
                return None  # the optimizer or the hand-written schedule here is the site
            return with_setting_value(setting, _times(setting.value, self.params["factor"]))
        if isinstance(node, cst.Assign):
            if node in manual_lr_writes(ctx) or (
                # ``lr = 0.05`` at module level feeding a hand-written update
                not any(optimizer_class(call, ctx) for call in ctx.nodes(cst.Call))
                and any(node is c for c in hyperparameter_constants(ctx, "lr"))
            ):
                return node.with_changes(value=_times(node.value, self.params["factor"]))
            return None
        found = optimizer_call(node, ctx)
        if found is not None and manual_lr_writes(ctx):
            line = ctx.position(manual_lr_writes(ctx)[0]).start.line
            return NonSite(
                f"equivalent: the hand-written schedule at line {line} sets the rate before "
                "every step"
            )
        if not (
            found is not None
            and (find_arg(found[0], "lr", 1) is not None or found[1] in DEFAULT_LR)
        ):
            return None
        assert isinstance(node, cst.Call)
        factor = self.params["factor"]
        lr = find_arg(node, "lr", 1)
        if lr is None:
            default = DEFAULT_LR[optimizer_class(node, ctx) or ""]
            return with_keyword(node, "lr", number_literal(default * factor))
        return with_arg_value(node, lr, _times(lr.value, factor))


def _anchor(updates: list[cst.CSTNode], ctx: Context) -> cst.CSTNode | None:
    """The first hand-written update the engine offers (a call or an assignment)."""
    offered = [u for u in updates if isinstance(u, (cst.Call, cst.Assign, cst.AugAssign))]
    return min(offered, key=lambda u: start_of(u, ctx), default=None)


def _scaled_update(update: cst.CSTNode, factor: float) -> cst.CSTNode | None:
    """The update with its step times ``factor``: ``p.add_(p.grad, alpha=-lr * 100)``,
    ``p.sub_(lr * p.grad * 100)``, ``p -= lr * p.grad * 100``, ``p.data = p.data - ... * 100``."""
    if isinstance(update, cst.Call):
        rate = find_arg(update, "alpha") or find_arg(update, "value")
        if rate is None:
            rate = next((a for a in update.args if not a.keyword and reads_grad(a.value)), None)
        return None if rate is None else with_arg_value(update, rate, _times(rate.value, factor))
    if isinstance(update, cst.AugAssign):
        return update.with_changes(value=_times(update.value, factor))
    value = update.value if isinstance(update, cst.Assign) else None
    if isinstance(value, cst.BinaryOperation) and reads_grad(value.right):
        return update.with_changes(value=value.with_changes(right=_times(value.right, factor)))
    return None
