"""The trainer's training, validation and prediction, through trainwreck's checks."""

import pytest
import torch
from fitkit import MLP, Trainer, make_data, make_loaders

from trainwreck.checks import (
    check_evaluation,
    check_loader_shuffles,
    check_overfit_batch,
    check_params_change,
    check_plateau_reaction,
    check_train_step_mode,
    make_fit_step,
    one_batch_loader,
)


@pytest.fixture
def loaders():
    return make_loaders(*make_data())


@pytest.fixture
def trainer():
    torch.manual_seed(0)
    return Trainer(MLP(), patience=2)


def test_loader_shuffles(loaders):
    train_loader, _ = loaders
    check_loader_shuffles(train_loader)


def fit_step(trainer):
    # fit() on a one-batch loader for one epoch is one training step on that batch
    return make_fit_step(lambda batch: trainer.fit(one_batch_loader(batch), epochs=1))


def test_fit_step_params_change(trainer, loaders):
    check_params_change(trainer.model, next(iter(loaders[0])), fit_step(trainer))


def test_fit_step_train_mode(trainer, loaders):
    check_train_step_mode(trainer.model, next(iter(loaders[0])), fit_step(trainer))


def test_fit_step_overfit_batch(trainer, loaders):
    check_overfit_batch(next(iter(loaders[0])), fit_step(trainer), steps=60, max_ratio=0.1)


def test_plateau_reaction(trainer, loaders, monkeypatch):
    train_loader, val_loader = loaders
    batch = next(iter(train_loader))

    def report(val_loss: float) -> None:
        # one epoch of fit() whose validation gives val_loss: fit's own scheduler call sees it
        monkeypatch.setattr(trainer, "evaluate", lambda loader: val_loss)
        trainer.fit(one_batch_loader(batch), val_loader, epochs=1)

    check_plateau_reaction(trainer.optimizer, report, patience=2)


def test_evaluation_validate(trainer, loaders):
    train_loader, val_loader = loaders
    trainer.fit(train_loader, epochs=1)
    check_evaluation(trainer.model, lambda: trainer.evaluate(val_loader))


def test_evaluation_predict(trainer, loaders):
    train_loader, val_loader = loaders
    trainer.fit(train_loader, epochs=1)
    inputs, _ = next(iter(val_loader))
    check_evaluation(trainer.model, lambda: trainer.predict(inputs))
