"""The library methods that see a script's numbers, patched to hand them over too.

- TensorBoard: ``SummaryWriter.add_scalar`` / ``add_scalars`` of ``torch.utils.tensorboard``
  and of ``tensorboardX`` (a tag is a name: ``Loss/val``; ``add_scalars("loss", {"val":
  ...})`` names ``loss/val``).
- wandb: ``Run.log`` (what ``wandb.log`` is bound to after ``wandb.init``) and, in
  ``disabled`` mode, ``NoopRun.log``; nested dicts name ``outer/inner``. ``wandb.init`` is
  made to run offline: ``mode="online"`` (or ``shared``) becomes ``offline``, and the
  collector sets ``WANDB_MODE=offline`` unless it is ``offline`` or ``disabled`` already.
- Lightning: ``LightningModule.log`` (``log_dict`` calls it). A value logged per batch in
  ``validation_step`` is one of many: the epoch's values are averaged (weighted by
  ``batch_size`` when given, as Lightning's default ``reduce_fx="mean"`` does) and handed
  over when the epoch changes or the run ends; the sanity check's batches are skipped.
- ``logging``: ``Logger.callHandlers`` sees every record that passed the logger's level
  and filters, whatever handlers the script installs or removes later.

Each wrapper looks up the active collector; with none (between runs) it only calls the
original. A wrapper never raises: a failure is noted in the ``capture`` summary.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator, Mapping
from types import ModuleType
from typing import Any

from experiments.capture import collect
from experiments.capture.keys import classify

MARK = "__trainwreck_capture__"
FORCED_OFFLINE = ("online", "shared")


def wrap(
    owner: Any, attribute: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]
) -> None:
    """Replace ``owner.attribute`` by ``make(original)``, once."""
    original = getattr(owner, attribute, None)
    if original is None or getattr(original, MARK, False):
        return
    wrapper = functools.wraps(original)(make(original))
    setattr(wrapper, MARK, True)
    setattr(owner, attribute, wrapper)


def _safely(where: str, hand_over: Callable[[collect.Collector], None]) -> None:
    collector = collect.active()
    if collector is None:
        return
    try:
        hand_over(collector)
    except Exception as error:
        collector.error(where, error)


def _arg(args: tuple[Any, ...], kwargs: Mapping[str, Any], index: int, name: str) -> Any:
    return args[index] if len(args) > index else kwargs.get(name)


# -- TensorBoard -------------------------------------------------------------------------


def patch_summary_writer(module: ModuleType) -> None:
    writer = module.SummaryWriter

    def add_scalar(original: Callable[..., Any]) -> Callable[..., Any]:
        def add_scalar(self: Any, *args: Any, **kwargs: Any) -> Any:
            tag, value = _arg(args, kwargs, 0, "tag"), _arg(args, kwargs, 1, "scalar_value")
            step = _arg(args, kwargs, 2, "global_step")
            _safely("add_scalar", lambda c: c.named("tensorboard", [(str(tag), value)], step))
            return original(self, *args, **kwargs)

        return add_scalar

    def add_scalars(original: Callable[..., Any]) -> Callable[..., Any]:
        def add_scalars(self: Any, *args: Any, **kwargs: Any) -> Any:
            main = str(_arg(args, kwargs, 0, "main_tag"))
            values = _arg(args, kwargs, 1, "tag_scalar_dict") or {}
            step = _arg(args, kwargs, 2, "global_step")
            items = [(f"{main}/{key}", value) for key, value in dict(values).items()]
            _safely("add_scalars", lambda c: c.named("tensorboard", items, step))
            return original(self, *args, **kwargs)

        return add_scalars

    wrap(writer, "add_scalar", add_scalar)
    wrap(writer, "add_scalars", add_scalars)


# -- wandb -------------------------------------------------------------------------------


def _flat(data: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _flat(value, name + "/")
        else:
            yield name, value


def _wandb_log(original: Callable[..., Any]) -> Callable[..., Any]:
    def log(self: Any, *args: Any, **kwargs: Any) -> Any:
        data = _arg(args, kwargs, 0, "data")
        if isinstance(data, Mapping):
            step = _arg(args, kwargs, 1, "step")

            def hand_over(collector: collect.Collector) -> None:
                items = list(_flat(data))
                found = dict(items)
                counter = step if step is not None else found.get("step", found.get("global_step"))
                collector.named("wandb", items, counter, found.get("epoch"))

            _safely("wandb.log", hand_over)
        return original(self, *args, **kwargs)

    return log


def patch_wandb_run(module: ModuleType) -> None:
    wrap(module.Run, "log", _wandb_log)


def patch_wandb_noop_run(module: ModuleType) -> None:
    wrap(module.NoopRun, "log", _wandb_log)


def patch_wandb_init(module: ModuleType) -> None:
    def init(original: Callable[..., Any]) -> Callable[..., Any]:
        def init(*args: Any, **kwargs: Any) -> Any:
            if collect.active() is not None and kwargs.get("mode") in FORCED_OFFLINE:
                kwargs["mode"] = "offline"  # a run never reaches the network
            return original(*args, **kwargs)

        return init

    wrap(module, "init", init)


# -- Lightning ---------------------------------------------------------------------------


class EpochMeans:
    """Per name, the weighted sum of one epoch's values (tensors stay on their device:
    no host sync per batch); handed over as one event when the epoch changes."""

    def __init__(self) -> None:
        self.epoch: int | None = None
        self.sums: dict[str, list[Any]] = {}

    def add(
        self, collector: collect.Collector, epoch: int, name: str, value: Any, weight: float
    ) -> None:
        if epoch != self.epoch:
            self.flush(collector)
            self.epoch = epoch
        detach = getattr(value, "detach", None)
        value = detach().float() if callable(detach) else float(value)
        entry = self.sums.setdefault(name, [0.0, 0.0])
        entry[0] = entry[0] + value * weight
        entry[1] += weight

    def flush(self, collector: collect.Collector) -> None:
        if self.sums:
            items = [(name, total / weight) for name, (total, weight) in self.sums.items()]
            collector.named("lightning", items, None, self.epoch)
        self.sums = {}


_epoch_means = EpochMeans()


def patch_lightning_module(module: ModuleType) -> None:
    def log(original: Callable[..., Any]) -> Callable[..., Any]:
        def log(self: Any, *args: Any, **kwargs: Any) -> Any:
            name, value = _arg(args, kwargs, 0, "name"), _arg(args, kwargs, 1, "value")
            trainer = getattr(self, "_trainer", None)
            key = classify(str(name))
            evaluation = key is not None and key.split in ("val", "test")
            # The sanity check's two batches are not an evaluation of the trained model.
            if (
                evaluation
                and trainer is not None
                and not getattr(trainer, "sanity_checking", False)
            ):
                weight = float(kwargs.get("batch_size") or 1)
                epoch = int(trainer.current_epoch)
                _safely(
                    "LightningModule.log",
                    lambda c: _epoch_means.add(c, epoch, str(name), value, weight),
                )
            return original(self, *args, **kwargs)

        return log

    wrap(module.LightningModule, "log", log)


def flush_lightning(collector: collect.Collector) -> None:
    _epoch_means.flush(collector)
    _epoch_means.epoch = None


# -- logging -----------------------------------------------------------------------------


def patch_logging() -> None:
    def call_handlers(original: Callable[..., Any]) -> Callable[..., Any]:
        def callHandlers(self: logging.Logger, record: logging.LogRecord) -> Any:
            _safely("logging", lambda c: c.message(record.getMessage()))
            return original(self, record)

        return callHandlers

    wrap(logging.Logger, "callHandlers", call_handlers)


def fresh_logging() -> None:
    """The root logger as a fresh interpreter has it. A forked run inherits the parent's
    (Hydra's console and file handlers, pytest's capture), and with a handler in place
    the script's ``logging.basicConfig(level=logging.INFO)`` does nothing: its
    ``logger.info`` lines would be dropped, neither shown nor captured."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)  # not closed: they are the parent's
    root.setLevel(logging.WARNING)
    logging.disable(logging.NOTSET)


PATCHES = {
    "torch.utils.tensorboard.writer": patch_summary_writer,
    "tensorboardX.writer": patch_summary_writer,
    "wandb": patch_wandb_init,
    "wandb.sdk.wandb_run": patch_wandb_run,
    "wandb.sdk.lib.noop_run": patch_wandb_noop_run,
    "lightning.pytorch.core.module": patch_lightning_module,
    "pytorch_lightning.core.module": patch_lightning_module,
}
