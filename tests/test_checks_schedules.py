"""trainwreck.checks for what happens over several steps: the learning rate schedule, a
plateau scheduler, a shuffling loader, a ``fit()`` driven one step at a time, and an
evaluation or prediction that keeps no graph. Each fails on its bug, passes when correct."""

from __future__ import annotations

import pytest
import torch
from checks_fixtures import MLP, blobs
from torch.optim.lr_scheduler import ReduceLROnPlateau, StepLR
from torch.utils.data import DataLoader, TensorDataset

from trainwreck.checks import (
    CheckFailed,
    check_evaluation,
    check_loader_shuffles,
    check_lr_changes,
    check_lr_schedule,
    check_overfit_batch,
    check_params_change,
    check_plateau_reaction,
    expected_lrs,
    make_fit_step,
    one_batch_loader,
)


class Trainer:
    """A small fit()-style trainer: one epoch per ``fit`` call, a StepLR per epoch."""

    def __init__(self, *, step_scheduler: str = "epoch", update: bool = True) -> None:
        torch.manual_seed(0)
        self.model = MLP()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.scheduler = StepLR(self.optimizer, step_size=2, gamma=0.5)
        self.step_scheduler, self.update = step_scheduler, update

    def fit(self, loader: DataLoader, epochs: int = 1) -> None:
        for _ in range(epochs):
            self.model.train()
            for x, y in loader:
                self.optimizer.zero_grad()
                torch.nn.functional.cross_entropy(self.model(x), y).backward()
                if self.update:
                    self.optimizer.step()
                if self.step_scheduler == "batch":
                    self.scheduler.step()
            if self.step_scheduler == "epoch":
                self.scheduler.step()


def loader(shuffle: bool = True) -> DataLoader:
    x, y = blobs(64)
    return DataLoader(TensorDataset(x, y), batch_size=16, shuffle=shuffle)


SCHEDULE = expected_lrs(lambda optimizer: StepLR(optimizer, 2, 0.5), 0.1, 6)


def test_expected_lrs_simulates_the_scheduler():
    assert pytest.approx([0.1, 0.05, 0.05, 0.025, 0.025, 0.0125]) == SCHEDULE


def test_lr_schedule_passes_when_the_scheduler_steps_per_epoch():
    trainer = Trainer()
    check_lr_schedule(trainer.optimizer, lambda: trainer.fit(loader()), SCHEDULE)


@pytest.mark.parametrize("where", ["batch", "never"])
def test_lr_schedule_fails_when_the_scheduler_steps_per_batch_or_never(where):
    trainer = Trainer(step_scheduler=where)
    with pytest.raises(
        CheckFailed, match=r"check_lr_schedule: expected the learning rate \S+ at step [12] "
    ):
        check_lr_schedule(trainer.optimizer, lambda: trainer.fit(loader()), SCHEDULE)


def test_lr_changes_needs_no_exact_schedule():
    trainer = Trainer()
    check_lr_changes(trainer.optimizer, lambda: trainer.fit(loader()), steps=3)
    frozen = Trainer(step_scheduler="never")
    with pytest.raises(CheckFailed, match="to change within 3 steps"):
        check_lr_changes(frozen.optimizer, lambda: frozen.fit(loader()), steps=3)


def plateau(mode: str, fed: str = "metric"):
    optimizer = torch.optim.SGD(MLP().parameters(), lr=0.1)
    scheduler = ReduceLROnPlateau(optimizer, mode=mode, patience=2, factor=0.5)

    def report(metric: float) -> None:  # the project's epoch end
        scheduler.step(metric if fed == "metric" else 0.0)

    return optimizer, report


def test_plateau_reaction_passes_on_a_correct_scheduler():
    optimizer, report = plateau("min")
    trace = check_plateau_reaction(optimizer, report, patience=2)
    assert trace[-1] < 0.1


def test_plateau_reaction_fails_on_the_wrong_mode_or_a_metric_never_given():
    optimizer, report = plateau("max")
    with pytest.raises(CheckFailed, match="while the metric improves"):
        check_plateau_reaction(optimizer, report, patience=2)
    optimizer, report = plateau("min", fed="constant")
    with pytest.raises(CheckFailed, match="while the metric improves"):
        check_plateau_reaction(optimizer, report, patience=2)


def test_plateau_reaction_fails_when_the_scheduler_is_never_stepped():
    optimizer = torch.optim.SGD(MLP().parameters(), lr=0.1)
    with pytest.raises(CheckFailed, match="to fall within 4 reports"):
        check_plateau_reaction(optimizer, lambda metric: None, patience=2)


def test_loader_shuffles():
    check_loader_shuffles(loader(shuffle=True))
    with pytest.raises(CheckFailed, match="the same batches in the same order"):
        check_loader_shuffles(loader(shuffle=False))
    state = torch.random.get_rng_state()
    check_loader_shuffles(loader(shuffle=True))
    assert torch.equal(state, torch.random.get_rng_state())  # the caller's RNG is kept


def test_make_fit_step_drives_a_fit_api_one_batch_at_a_time():
    trainer = Trainer(step_scheduler="never")
    step = make_fit_step(lambda batch: trainer.fit(one_batch_loader(batch)))
    batch = next(iter(loader()))
    check_params_change(trainer.model, batch, step)
    check_overfit_batch(batch, step, steps=60, max_ratio=0.1)


def test_make_fit_step_sees_a_broken_fit():
    broken = Trainer(step_scheduler="never", update=False)  # optimizer.step() removed
    step = make_fit_step(lambda batch: broken.fit(one_batch_loader(batch)))
    with pytest.raises(CheckFailed, match="check_overfit_batch"):
        check_overfit_batch(next(iter(loader())), step, steps=60, max_ratio=0.1)
    with pytest.raises(CheckFailed, match="make_fit_step: expected fit"):
        make_fit_step(lambda batch: None)(next(iter(loader())))


def test_evaluation_fails_on_predictions_that_carry_a_graph():
    model = MLP()
    x, _ = blobs(16)
    model.eval()

    def predict() -> torch.Tensor:  # eval mode, but no torch.no_grad()
        model.eval()
        return model(x)

    with pytest.raises(CheckFailed, match="no autograd graph"):
        check_evaluation(model, predict)

    def predict_right() -> torch.Tensor:
        model.eval()
        with torch.no_grad():
            return model(x)

    check_evaluation(model, predict_right)
