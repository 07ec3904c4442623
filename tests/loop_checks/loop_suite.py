"""The training checks, applied to a reference loop's own objects.

Each ``test_<loop>.py`` builds a ``Parts`` from its loop (``parts`` fixture) and imports the
tests below, so every loop runs the same checks on its own code: the model class, the data
pipeline, the loss, the optimizer and the train step exactly as ``main()`` builds them.
They are taken from ``main()`` itself: ``capture_call`` replaces the loop's epoch function
with a recorder that stops ``main()`` at its first call and keeps the arguments. So a
mutant anywhere before that call (model, data, loss, optimizer set-up) or inside the epoch
function (the step, which the checks call on batches they choose) reaches the checks.

The loop is loaded from this tree's ``reference_loops/`` once per test, through the import
system's finders, so under ``trainwreck test`` the mutant is what runs (its import hook
serves it), and per-test coverage sees every test execute the loop's set-up.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from trainwreck.checks import (
    check_batch_independence,
    check_evaluation,
    check_gradients,
    check_initial_loss,
    check_labels_aligned,
    check_loader_shuffles,
    check_loss_decreases,
    check_lr_trace,
    check_overfit_batch,
    check_params_change,
    check_train_eval_modes,
    check_train_step_mode,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def single_thread() -> Any:
    """One intra-op thread: these tiny models run 30x slower when threads contend for
    busy cores, and ``trainwreck test`` runs its children with one thread anyway."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def load_loop(name: str) -> ModuleType:
    """A fresh copy of ``reference_loops/<name>.py`` from this tree.

    Found through the import system's finders (``sys.meta_path``), as ``import`` would,
    not by path alone: ``trainwreck test`` serves a mutant of the file through an import
    hook, and loading the file by path would test the unmutated loop under every mutant.
    """
    folder = [str(ROOT / "reference_loops")]
    spec = None
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        spec = find_spec(f"reference_loops.{name}", folder) if find_spec else None
        if spec is not None:
            break
    assert spec is not None and spec.loader is not None, f"no reference_loops/{name}.py"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Captured(Exception):
    """Raised by the recorder to stop ``main()`` at the call it was waiting for."""


def capture_call(owner: Any, attr: str, run: Callable[[], Any]) -> dict[str, Any]:
    """Run ``run()`` until it calls ``owner.attr``; return that call's arguments by name."""
    original = getattr(owner, attr)
    signature = inspect.signature(original)
    seen: dict[str, Any] = {}

    def recorder(*args: Any, **kwargs: Any) -> Any:
        seen.update(signature.bind(*args, **kwargs).arguments)
        raise _Captured

    setattr(owner, attr, recorder)
    try:
        run()
    except _Captured:
        pass
    finally:
        setattr(owner, attr, original)
    assert seen, f"main() never called {attr}"
    return seen


def captured_main(name: str) -> tuple[ModuleType, dict[str, Any]]:
    """The loop, and the arguments its ``main()`` passes to its first ``train_one_epoch``."""
    loop = load_loop(name)
    return loop, capture_call(loop, "train_one_epoch", lambda: loop.main(["--seed", "0"]))


def one_batch_loader(batch: tuple[torch.Tensor, torch.Tensor]) -> DataLoader:
    """A loader yielding exactly ``batch``: the loop's epoch function then takes one step."""
    return DataLoader(TensorDataset(*batch), batch_size=len(batch[0]))


def draw(loader: Any, n: int) -> list[Any]:
    """The first ``n`` batches the loader yields, starting a new pass when one ends, so a
    training split or batch count smaller than the test expected is not an error."""
    batches: list[Any] = []
    while len(batches) < n:
        before = len(batches)
        batches.extend(islice(loader, n - len(batches)))
        assert len(batches) > before, "the training loader yields no batch"
    return batches


def take(loader: Any, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``n`` samples the loader yields (fewer if one pass has fewer)."""
    xs, ys, count = [], [], 0
    for x, y in loader:
        xs.append(x)
        ys.append(y)
        count += len(x)
        if count >= n:
            break
    return torch.cat(xs)[:n], torch.cat(ys)[:n]


def bind(fn: Callable[..., Any], known: dict[str, Any], **given: Any) -> Any:
    """Call ``fn`` with the arguments it names, from ``given`` first, then ``known``."""
    names = inspect.signature(fn).parameters
    return fn(**{k: given.get(k, known.get(k)) for k in names if k in given or k in known})


@dataclass
class Parts:
    """A loop's objects and the settings its checks need (chosen from the correct loop)."""

    model: nn.Module
    batch: tuple[torch.Tensor, torch.Tensor]  # one training batch, as the loader yields it
    train_step: Callable[[Any], Any]  # the loop's own step on a batch; returns its loss
    loss_fn: Callable[[torch.Tensor, Any], torch.Tensor]  # the loop's criterion
    evaluate: Callable[[], Any]  # the loop's own evaluation
    batches: list[Any]  # fresh training batches, for the loss to decrease over
    labels: tuple[torch.Tensor, torch.Tensor]  # samples for the label check
    expected_loss: float
    label_check: Callable[[torch.Tensor, torch.Tensor], Any] = check_labels_aligned
    forward: Callable[[nn.Module, Any], torch.Tensor] | None = None
    initial_tol: float = 0.1
    min_drop: float = 0.1
    overfit_steps: int = 60
    overfit_ratio: float = 0.1
    loader: Any = None  # the training loader main() built (None: the test is skipped)
    # (loop, the learning rate at the start of each epoch of the correct loop) for loops
    # whose main() steps a scheduler per epoch; None: the test is skipped
    schedule: tuple[str, list[float]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def test_initial_loss(parts: Parts) -> None:
    check_initial_loss(
        lambda: parts.train_step(parts.batch),
        expected=parts.expected_loss,
        rel_tol=parts.initial_tol,
    )


def test_gradients(parts: Parts) -> None:
    check_gradients(parts.model, parts.batch, parts.loss_fn, forward=parts.forward)


def test_params_change(parts: Parts) -> None:
    check_params_change(parts.model, parts.batch, parts.train_step)


def test_batch_independence(parts: Parts) -> None:
    check_batch_independence(parts.model, parts.batch[0], forward=parts.forward, sample=1)


def test_train_eval_modes(parts: Parts) -> None:
    check_train_eval_modes(parts.model, parts.batch[0], forward=parts.forward)


def test_train_step_mode(parts: Parts) -> None:
    check_train_step_mode(parts.model, parts.batch, parts.train_step)


def test_evaluation(parts: Parts) -> None:
    check_evaluation(parts.model, parts.evaluate)


def test_labels_aligned(parts: Parts) -> None:
    parts.label_check(*parts.labels)


def test_loss_decreases(parts: Parts) -> None:
    check_loss_decreases(parts.train_step, parts.batches, min_drop=parts.min_drop)


def test_overfit_batch(parts: Parts) -> None:
    check_overfit_batch(
        parts.batch, parts.train_step, steps=parts.overfit_steps, max_ratio=parts.overfit_ratio
    )


def test_loader_shuffles(parts: Parts) -> None:
    if parts.loader is None:
        pytest.skip("the loop's training data is not a loader this test can reach")
    check_loader_shuffles(parts.loader)


def test_lr_schedule(parts: Parts, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if parts.schedule is None:
        pytest.skip("no scheduler stepped per epoch by main()")
    monkeypatch.chdir(tmp_path)  # main() may write (a checkpoint) where it runs
    name, expected = parts.schedule
    check_lr_trace(epoch_lrs(name, len(expected)), expected)


def epoch_lrs(name: str, epochs: int) -> list[float]:
    """``main()`` run for ``epochs`` epochs, its epoch function replaced by one that trains
    nothing and notes the learning rate at each epoch's start: the schedule as ``main()``
    drives it (scheduler steps, a resume from a checkpoint), one epoch at a time."""
    loop = load_loop(name)
    signature = inspect.signature(loop.train_one_epoch)
    lrs: list[float] = []

    def stand_in(*args: Any, **kwargs: Any) -> float:
        optimizer = signature.bind(*args, **kwargs).arguments["optimizer"]
        lrs.append(float(optimizer.param_groups[0]["lr"]))
        return 0.0

    loop.train_one_epoch = stand_in  # main() looks its epoch function up at each call
    loop.main(["--seed", "0", "--epochs", str(epochs)])
    return lrs


def epoch_function_parts(
    loop: ModuleType,
    captured: dict[str, Any],
    *,
    loss_fn: Callable[[torch.Tensor, Any], torch.Tensor],
    expected_loss: float,
    data_arg: str = "loader",
    to_data: Callable[[Any], Any] = one_batch_loader,
    n_batches: int = 9,
    n_labels: int = 256,
    **settings: Any,
) -> Parts:
    """Parts of a loop with ``train_one_epoch(...)`` and ``evaluate(...)`` functions.

    ``captured`` holds the arguments ``main()`` passed to ``train_one_epoch``; the train
    step calls it again with them and a one-batch ``data_arg`` (``to_data(batch)``), and
    the evaluation calls ``evaluate`` with the arguments it shares with the step.
    """
    loader = captured[data_arg]
    batches = draw(loader, n_batches + 1) if data_arg == "loader" else []
    labels = take(loader, n_labels) if data_arg == "loader" else settings.pop("labels")
    held_out = to_data(labels) if data_arg == "loader" else to_data(settings.pop("held_out"))

    def train_step(batch: Any) -> Any:
        return bind(loop.train_one_epoch, captured, **{data_arg: to_data(batch)})

    return Parts(
        model=captured["model"],
        batch=batches[0] if batches else settings.pop("batch"),
        train_step=train_step,
        loss_fn=loss_fn,
        evaluate=lambda: bind(loop.evaluate, captured, **{data_arg: held_out}),
        batches=batches[1:] if batches else settings.pop("batches"),
        labels=labels,
        expected_loss=expected_loss,
        loader=loader if data_arg == "loader" else None,
        **settings,
    )
