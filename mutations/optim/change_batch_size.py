"""The ``change_batch_size`` operator (ChangeBatchSize)."""

from __future__ import annotations

import libcst as cst

from mutations.optim._batch import (
    configured_site,
    deferred_settings,
    drops_last,
    literal_samples,
    loader_batch_size,
    shape_conflict,
)
from mutations.optim._shared import _times, factor_literal
from mutator.context import Context
from mutator.operator import Example, NonSite, Param, Replacement, Swap
from mutator.semantics import (
    as_factor,
    code_of,
    compact_code,
    hyperparameter_constants,
    is_data_loader,
    number_literal,
    number_value,
    training_loader_setting,
    with_arg_value,
)
from mutator.semantics.config import config_setting, reads_field, with_setting_value


def _whole_dataset(loader: cst.Call, size: cst.BaseExpression) -> bool:
    """``DataLoader(ds, batch_size=len(ds))``: one batch holds every sample."""
    data = loader.args[0].value if loader.args and loader.args[0].keyword is None else None
    if data is None or not isinstance(size, cst.Call) or not size.args:
        return False
    is_len = isinstance(size.func, cst.Name) and size.func.value == "len"
    return is_len and compact_code(size.args[0].value) == compact_code(data)


class ChangeBatchSize(Swap):
    """Multiply the training DataLoader's ``batch_size`` by ``factor`` (x8, or x1/8).

    Bug: a batch size changed without retuning anything else (a GPU with more memory, a
    config copied from another run). Impact: with a fixed number of epochs, x8 means 8x
    fewer optimizer steps at the same learning rate, so training ends markedly underfit
    (and larger batches generalise a little worse); x1/8 means noisier gradients and 8x
    more steps (slower, noisier curves, sometimes instability at the old LR). Validation
    loaders are not sites, nor, for x8, a batch that already holds the whole dataset. A
    batch size that also sizes code meeting the training batch (labels, a hidden state) is
    changed where it is configured, so every reader agrees; where the script does not show
    that place, or the value also sets the learning rate, it is no site (a shape crash).
    Without a DataLoader that reads it, the batch size of a config object is a site (a
    dataclass field, a settings dict entry, an argparse default: issue 22). Not told apart:
    a training set smaller than the x8 batch with ``drop_last=True``, where the mutant trains
    nothing at all (1 of 31 corpus mutants: LLMs-from-scratch's five-sample DDP demo).
    Fix: scale the LR with the batch size (linear rule for SGD,
    ~sqrt for Adam) and budget in steps, not epochs. Check: count optimizer steps per
    epoch; compare loss-vs-steps and loss-vs-samples curves with the reference.
    """

    name = "change_batch_size"
    category = "optim"
    summary = "Multiply the training batch size by a factor (x8 or x1/8) with nothing retuned."
    expected = "degrades"
    witness = "factor first_batch", "the first training batch has another size"
    claims = frozenset({"training_loader"})
    node_types = (cst.Call, cst.Assign, cst.AnnAssign, cst.DictElement)
    parameters = {"factor": Param(8.0, "multiplier applied to batch_size", valid="(0, inf)")}
    variants = ({"factor": 0.125},)
    examples = (
        # A kwargs dict the training DataLoader unpacks.
        Example(
            before="""
                from torch.utils.data import DataLoader
                train_kwargs = {"batch_size": 64, "shuffle": True}
                train_loader = DataLoader(train_ds, **train_kwargs)
            """,
            after="""
                from torch.utils.data import DataLoader
                train_kwargs = {"batch_size": 512, "shuffle": True}
                train_loader = DataLoader(train_ds, **train_kwargs)
            """,
        ),
        # Hand-made batches from a module-level constant: the constant is the setting.
        Example(
            before="""
                batch_size = 32
                for start in range(0, len(x), batch_size):
                    batch = x[start : start + batch_size]
            """,
            after="""
                batch_size = 256
                for start in range(0, len(x), batch_size):
                    batch = x[start : start + batch_size]
            """,
        ),
        Example(
            before="""
                from torch.utils.data import DataLoader
                train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
            """,
            after="""
                from torch.utils.data import DataLoader
                train_loader = DataLoader(train_ds, batch_size=512, shuffle=True)
            """,
        ),
        Example(
            before="""
                import torch
                loader = torch.utils.data.DataLoader(ds, batch_size=args.batch_size, shuffle=True)
            """,
            after="""
                import torch
                loader = torch.utils.data.DataLoader(ds, batch_size=args.batch_size * 8, shuffle=True)
            """,
        ),
        Example(
            before="""
                from torch.utils.data import DataLoader
                dl = DataLoader(train_set, 64)
            """,
            after="""
                from torch.utils.data import DataLoader
                dl = DataLoader(train_set, 8)
            """,
            params={"factor": 0.125},
        ),
        Example(
            before="""
                from torch.utils.data import DataLoader
                fit(DataLoader(train_ds, batch_size=bs, shuffle=True))
            """,
            after="""
                from torch.utils.data import DataLoader
                fit(DataLoader(train_ds, batch_size=max(1, bs // 8), shuffle=True))
            """,
            params={"factor": 0.125},
        ),
        # Config objects read by a replay buffer or a loader factory (issue 22).
        Example(
            before="""
                from dataclasses import dataclass
                @dataclass
                class Args:
                    batch_size: int = 128
                data = rb.sample(args.batch_size)
            """,
            after="""
                from dataclasses import dataclass
                @dataclass
                class Args:
                    batch_size: int = 1024
                data = rb.sample(args.batch_size)
            """,
        ),
        Example(
            before="""
                SETTINGS = {"learning_rate": 5e-4, "batch_size": 2}
                loader = create_dataloader_v1(text, batch_size=SETTINGS["batch_size"])
            """,
            after="""
                SETTINGS = {"learning_rate": 5e-4, "batch_size": 16}
                loader = create_dataloader_v1(text, batch_size=SETTINGS["batch_size"])
            """,
        ),
        Example(
            before="""
                parser.add_argument('--batch_size', type=int, default=80)
                train_data = batchify(corpus.train, args.batch_size, args)
            """,
            after="""
                parser.add_argument('--batch_size', type=int, default=640)
                train_data = batchify(corpus.train, args.batch_size, args)
            """,
        ),
        # Labels sized by the configured batch size in another function: the size is
        # changed where it is configured, so the labels follow (issue 29).
        Example(
            before="""
                import torch
                from torch.utils.data import DataLoader
                parser.add_argument("--batch_size", type=int, default=64)
                loader = DataLoader(dataset, batch_size=opt.batch_size, shuffle=True, drop_last=True)
                def labels():
                    return torch.ones(opt.batch_size, 1)
                for imgs, _ in loader:
                    loss = criterion(D(imgs), labels())
                    loss.backward()
            """,
            after="""
                import torch
                from torch.utils.data import DataLoader
                parser.add_argument("--batch_size", type=int, default=512)
                loader = DataLoader(dataset, batch_size=opt.batch_size, shuffle=True, drop_last=True)
                def labels():
                    return torch.ones(opt.batch_size, 1)
                for imgs, _ in loader:
                    loss = criterion(D(imgs), labels())
                    loss.backward()
            """,
        ),
        # A helper of the script builds the training loader with the caller's size (issue 29).
        Example(
            before="""
                from torch.utils.data import DataLoader
                def make_loader(dataset, batch_size, shuffle=False):
                    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle)
                train_loader = make_loader(train_set, 32, shuffle=True)
                val_loader = make_loader(val_set, 64)
            """,
            after="""
                from torch.utils.data import DataLoader
                def make_loader(dataset, batch_size, shuffle=False):
                    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle)
                train_loader = make_loader(train_set, 256, shuffle=True)
                val_loader = make_loader(val_set, 64)
            """,
        ),
        # A noise tensor sized by it that only feeds sample images meets no training batch.
        Example(
            before="""
                import torch
                from torch.utils.data import DataLoader
                batch_size = 128
                fixed_noise = torch.randn(batch_size, 16)
                loader = DataLoader(train_set, batch_size=batch_size, shuffle=True)
                def save_samples(epoch):
                    save_image(netG(fixed_noise), f"sample_{epoch}.png")
            """,
            after="""
                import torch
                from torch.utils.data import DataLoader
                batch_size = 128
                fixed_noise = torch.randn(batch_size, 16)
                loader = DataLoader(train_set, batch_size=batch_size * 8, shuffle=True)
                def save_samples(epoch):
                    save_image(netG(fixed_noise), f"sample_{epoch}.png")
            """,
        ),
    )
    non_examples = (
        # Five samples written out, drop_last=True: a batch of 16 would yield none (issue 29).
        """
            import torch
            from torch.utils.data import DataLoader
            X_train = torch.tensor([[-1.2, 3.1], [-0.9, 2.9], [-0.5, 2.6], [2.3, -1.1], [2.7, -1.5]])
            y_train = torch.tensor([0, 0, 0, 1, 1])
            train_ds = ToyDataset(X_train, y_train)
            train_loader = DataLoader(dataset=train_ds, batch_size=2, shuffle=True, drop_last=True)
            for x, y in train_loader:
                loss = criterion(model(x), y)
                loss.backward()
        """,
        """
            from torch.utils.data import DataLoader
            val_loader = DataLoader(val_ds, batch_size=256)
        """,
        """
            from torch.utils.data import DataLoader
            test_loader = DataLoader(test_ds, batch_size=64, shuffle=True)
        """,
        """
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=None)
        """,
        """
            from torch.utils.data import DataLoader
            train_loader = DataLoader(train_ds, shuffle=True)
        """,
        # Full-batch training: a larger batch is still the whole dataset (equivalent).
        """
            from torch.utils.data import DataLoader
            train_loader = DataLoader(train_ds, batch_size=len(train_ds), shuffle=True)
        """,
        # The batch size also sizes the initial hidden state: x8 is a shape crash.
        """
            import torch
            from torch.utils.data import DataLoader
            train_loader = DataLoader(train_ds, batch_size=args.batch_size, shuffle=True, drop_last=True)
            hidden = torch.zeros(2, args.batch_size, 128)
            for x, y in train_loader:
                out, hidden = model(x, hidden.detach())
                loss = criterion(out, y)
                loss.backward()
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | NonSite | None:
        setting = config_setting(node, ctx, "batch_size")
        if setting is not None:
            # ``batch_size: int = 128`` in a config object that a replay buffer or a loader
            # factory reads (issue 22); a DataLoader reading it is the site instead.
            # Where the loader's size also sizes code that meets the training batch, the
            # configured value is the site (issue 29).
            taken = training_loader_setting(ctx, "batch_size") or any(
                is_data_loader(call, ctx) and reads_field(call, setting.field, ctx)
                for call in ctx.nodes(cst.Call)
            )
            if taken and all(node is not place for place in deferred_settings(ctx)):
                return None
            return with_setting_value(setting, self._scaled(setting.value))
        if isinstance(node, cst.DictElement):  # ``train_kwargs = {"batch_size": 64}``
            if node in training_loader_setting(ctx, "batch_size"):
                return node.with_changes(value=self._scaled(node.value))
            return None
        if isinstance(node, cst.Assign):
            # ``batch_size = 12`` at module level, when no DataLoader takes the size.
            deferred = any(node is place for place in deferred_settings(ctx))
            if deferred or (
                not any(is_data_loader(call, ctx) for call in ctx.nodes(cst.Call))
                and any(node is c for c in hyperparameter_constants(ctx, "batch_size"))
            ):
                return node.with_changes(value=self._scaled(node.value))
            return None
        size = loader_batch_size(node, ctx)
        if size is None:
            return None
        assert isinstance(node, cst.Call)
        if self.params["factor"] > 1 and _whole_dataset(node, size.value):
            return NonSite(
                f"equivalent: batch_size={code_of(size.value)} is the whole dataset already"
            )
        held = literal_samples(node, ctx)
        scaled = number_value(self._scaled(size.value))
        if held is not None and scaled is not None and held < scaled and drops_last(node):
            return NonSite(
                f"the dataset holds {held} samples: batches of {int(scaled)} with "
                "drop_last=True yield none, so nothing trains"
            )
        sized = shape_conflict(size.value, ctx)
        if sized is not None:
            place = configured_site(size.value, ctx)
            if place is not None:
                return None  # changed where it is configured: every reader agrees
            return NonSite(
                f"`{code_of(size.value)}` also sizes code at line "
                f"{ctx.position(sized).start.line} that meets the training batch, and "
                "where it is set the script does not show (or it also sets the learning "
                "rate): the mutant would fail on a shape mismatch"
            )
        return with_arg_value(node, size, self._scaled(size.value))

    def _scaled(self, size: cst.BaseExpression) -> cst.BaseExpression:
        factor = self.params["factor"]
        value = number_value(size)
        if value is not None:
            return number_literal(max(1, int(value * factor)), integer=True)
        if factor >= 1:
            if factor == int(factor):
                return _times(size, factor)
            # A non-integral factor (a strength search's x1.99) must still give an int.
            grown = cst.BinaryOperation(as_factor(size), cst.Multiply(), factor_literal(factor))
            return cst.Call(cst.Name("int"), [cst.Arg(grown)])
        divisor = 1 / factor
        if abs(divisor - round(divisor)) < 1e-9:  # x0.125 reads best as // 8
            smaller: cst.BaseExpression = cst.BinaryOperation(
                as_factor(size), cst.FloorDivide(), cst.Integer(str(round(divisor)))
            )
        else:
            product = cst.BinaryOperation(as_factor(size), cst.Multiply(), factor_literal(factor))
            smaller = cst.Call(cst.Name("int"), [cst.Arg(product)])
        return cst.Call(cst.Name("max"), [cst.Arg(cst.Integer("1")), cst.Arg(smaller)])
