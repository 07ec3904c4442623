import math

import numpy as np
import torch
from torch import nn
from wit.train import (
    fit,
    fit_classifier,
    fit_noisy,
    fit_regression,
    fit_tagger,
    make_data,
    predict,
    train_step,
)


def test_overfits_one_batch():
    torch.manual_seed(0)
    x, y = make_data(16, seed=1, classes=3)
    model = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.3, momentum=0.9)
    first = train_step(model, x, y, optimizer)
    for _ in range(150):
        last = train_step(model, x, y, optimizer)
    assert last < 0.05 * first


def test_fit_returns_finite_losses():
    torch.manual_seed(0)
    x, y = make_data()
    model = nn.Linear(4, 2)
    losses = fit(model, x, y)
    assert all(math.isfinite(loss) for loss in losses)
    assert predict(model, x).shape == (64,)


def test_regression_reports_its_loss():
    torch.manual_seed(0)
    x, _ = make_data()
    assert fit_regression(x, x[:, 0] - x[:, 1]) >= 0


def test_tagger_trains():
    torch.manual_seed(0)
    x = torch.randn(32, 5, 4)
    y = (x[..., 0] > 0).long()
    assert isinstance(fit_tagger(x, y), nn.Module)


def test_classifier_runs():
    # No seed: the data and the model's initial weights come from wherever torch's random
    # state happens to be, which depends on the tests that ran before this one.
    x = torch.randn(32, 4)
    fit_classifier(x, (x[:, 0] > 0).long())


def test_noisy_classifier_runs():
    # Noise from a generator seeded by the system: other numbers in every session.
    noise = np.random.default_rng().normal(size=(32, 4)).astype("float32")
    x = torch.randn(32, 4, generator=torch.Generator().manual_seed(0))
    fit_noisy(x + torch.from_numpy(noise), (x[:, 0] > 0).long())
