"""The ``weight_decay_too_high`` operator (WeightDecayTooHigh)."""

from __future__ import annotations

import libcst as cst

from mutations.optim._shared import _times, optimizer_call
from mutator.context import Context
from mutator.operator import Example, NonSite, Param, Replacement, Swap
from mutator.semantics import (
    every_group_sets,
    find_arg,
    group_dicts,
    group_sets,
    number_literal,
    number_value,
    per_module,
    resolve,
    with_arg_value,
    with_keyword,
)
from mutator.semantics.config import config_setting, with_setting_value

# Decay PyTorch applies when ``weight_decay`` is not given (non-zero only for AdamW).
_DEFAULT_WEIGHT_DECAY = {"AdamW": 0.01}


@per_module
def _group_decays(ctx: Context) -> list[cst.DictElement | cst.Arg]:
    """Non-zero ``"weight_decay": wd`` entries of the parameter groups an optimizer gets,
    written ``{...}`` or ``dict(params=..., weight_decay=wd)`` (issue 29: PyG's GCN)."""
    found: list[cst.DictElement | cst.Arg] = []
    for call in ctx.nodes(cst.Call):
        if optimizer_call(call, ctx) is None:
            continue
        for group in group_dicts(call, ctx) or ():  # type: ignore[arg-type]
            entry = group_sets(group, "weight_decay")
            if entry is not None and number_value(entry.value) != 0:
                found.append(entry)
        params = find_arg(call, "params", 0)  # type: ignore[arg-type]
        groups = params.value if params is not None else None
        for element in groups.elements if isinstance(groups, cst.List) else ():
            made = element.value
            if isinstance(made, cst.Call) and resolve(made.func, ctx).names == {"builtins.dict"}:
                entry = find_arg(made, "weight_decay")
                if entry is not None and number_value(entry.value) != 0:
                    found.append(entry)
    return found


class WeightDecayTooHigh(Swap):
    """Multiply the optimizer's ``weight_decay`` by ``factor`` (AdamW's implicit 0.01 too).

    Bug: a regularisation strength off by orders of magnitude (a value meant for decoupled
    AdamW given to coupled SGD/Adam, ``5e-2`` typed for ``5e-4``). Impact: the decay term
    dominates the gradient, weights shrink towards zero and the model underfits: the
    training loss plateaus well above the reference and accuracy stays low; at the
    extreme the loss drifts back up to chance level. Fix: typical values are 1e-4 to 5e-4
    for SGD/Adam (coupled L2) and 0.01 to 0.1 for AdamW; tune on validation data. Check:
    log the global weight norm (it collapses) and compare the training loss with a run
    without decay.
    """

    name = "weight_decay_too_high"
    category = "optim"
    summary = "Multiply weight_decay by a factor (x100): weights shrink, the model underfits."
    expected = "degrades"
    witness = "factor optimizer.weight_decay", "the weight decay at the first step is scaled"
    node_types = (cst.Call, cst.DictElement, cst.Arg, cst.Assign, cst.AnnAssign)
    parameters = {"factor": Param(100.0, "multiplier applied to weight_decay", valid="(0, inf)")}
    examples = (
        Example(
            before="""
                import torch
                groups = [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}]
                opt = torch.optim.AdamW(groups, lr=6e-4)
            """,
            after="""
                import torch
                groups = [{"params": decay, "weight_decay": 10.0}, {"params": rest, "weight_decay": 0.0}]
                opt = torch.optim.AdamW(groups, lr=6e-4)
            """,
        ),
        Example(
            before="""
                import torch
                opt = torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=5e-4)
            """,
            after="""
                import torch
                opt = torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.05)
            """,
        ),
        Example(
            before="""
                from torch import optim
                opt = optim.AdamW(ps, lr=1e-3)
            """,
            after="""
                from torch import optim
                opt = optim.AdamW(ps, lr=1e-3, weight_decay=1.0)
            """,
        ),
        Example(
            before="""
                import torch
                opt = torch.optim.Adam(ps, weight_decay=cfg.wd)
            """,
            after="""
                import torch
                opt = torch.optim.Adam(ps, weight_decay=cfg.wd * 100)
            """,
        ),
        # A config handed to a trainer that builds the optimizer (issue 29).
        Example(
            before="""
                config = {"lr": 3e-4, "weight_decay": 0.1}
                trainer = Trainer(model, config)
            """,
            after="""
                config = {"lr": 3e-4, "weight_decay": 10.0}
                trainer = Trainer(model, config)
            """,
        ),
        # Groups written with dict(...) (issue 29: PyG's GCN decays the first layer only).
        Example(
            before="""
                import torch
                opt = torch.optim.Adam([
                    dict(params=model.conv1.parameters(), weight_decay=5e-4),
                    dict(params=model.conv2.parameters(), weight_decay=0)
                ], lr=0.01)
            """,
            after="""
                import torch
                opt = torch.optim.Adam([
                    dict(params=model.conv1.parameters(), weight_decay=0.05),
                    dict(params=model.conv2.parameters(), weight_decay=0)
                ], lr=0.01)
            """,
        ),
        # A settings-class field and a dotted assignment a trainer reads (issue 29).
        Example(
            before="""
                from dataclasses import dataclass
                @dataclass
                class TrainConfig:
                    lr: float = 3e-4
                    weight_decay: float = 0.1
                cfg = TrainConfig()
                trainer = Trainer(model, lr=cfg.lr, weight_decay=cfg.weight_decay)
            """,
            after="""
                from dataclasses import dataclass
                @dataclass
                class TrainConfig:
                    lr: float = 3e-4
                    weight_decay: float = 10.0
                cfg = TrainConfig()
                trainer = Trainer(model, lr=cfg.lr, weight_decay=cfg.weight_decay)
            """,
        ),
        Example(
            before="""
                config = get_default_config()
                config.weight_decay = 0.1
                trainer = Trainer(config, model, train_dataset)
            """,
            after="""
                config = get_default_config()
                config.weight_decay = 10.0
                trainer = Trainer(config, model, train_dataset)
            """,
        ),
    )
    non_examples = (
        """
            import torch
            opt = torch.optim.Adam(ps, lr=1e-3)
        """,
        """
            import torch
            opt = torch.optim.SGD(ps, lr=0.1, weight_decay=0)
        """,
        "model = build(weight_decay=5e-4)\n",
        # every parameter group sets its own decay: AdamW's default is never used
        """
            import torch
            groups = [{"params": a, "weight_decay": 0.0}, {"params": b, "weight_decay": 0.0}]
            opt = torch.optim.AdamW(groups, lr=1e-3)
        """,
    )

    def _decay(self, node: cst.CSTNode, ctx: Context) -> tuple[str, cst.Arg | None] | None:
        found = optimizer_call(node, ctx)
        if found is None:
            return None
        call, optimizer = found
        decay = find_arg(call, "weight_decay")
        if decay is None:
            return (optimizer, None) if optimizer in _DEFAULT_WEIGHT_DECAY else None
        return None if number_value(decay.value) == 0 else (optimizer, decay)

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | NonSite | None:
        if isinstance(node, (cst.DictElement, cst.Arg)) and node in _group_decays(ctx):
            return node.with_changes(value=_times(node.value, self.params["factor"]))
        if isinstance(node, cst.Arg):
            return None
        setting = config_setting(node, ctx, "weight_decay")
        if setting is not None:
            # A config value handed to code that builds the optimizer where the script does
            # not show (issue 29); an optimizer built here takes the decay: that is the site.
            if number_value(setting.value) == 0 or any(
                optimizer_call(call, ctx) for call in ctx.nodes(cst.Call)
            ):
                return None
            return with_setting_value(setting, _times(setting.value, self.params["factor"]))
        if not isinstance(node, cst.Call):
            return None
        if every_group_sets(node, ctx, "weight_decay"):
            return NonSite("equivalent: every parameter group sets its own weight_decay")
        found = self._decay(node, ctx)
        if found is None:
            return None
        assert isinstance(node, cst.Call)
        optimizer, decay = found
        factor = self.params["factor"]
        if decay is None:
            return with_keyword(
                node, "weight_decay", number_literal(_DEFAULT_WEIGHT_DECAY[optimizer] * factor)
            )
        return with_arg_value(node, decay, _times(decay.value, factor))
