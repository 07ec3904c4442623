"""Small training code with tests of uneven strength (tests/test_mutation_testing_witness.py)."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

BATCH = 16  # the regression's batch size


def make_data(n: int = 64, seed: int = 0, classes: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=generator)
    return x, torch.randint(0, classes, (n,), generator=generator)


def train_step(model, x, y, optimizer) -> float:
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def fit(net, x, y, steps: int = 20) -> list[float]:
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    losses = []
    for step in range(steps):
        net.train()
        losses.append(train_step(net, x, y, optimizer))
        if step % 5 == 4:
            net.eval()
            with torch.no_grad():
                print(f"step {step}: {nn.functional.cross_entropy(net(x), y).item():.3f}")
    return losses


@torch.no_grad()
def predict(model, x) -> torch.Tensor:
    model.eval()
    return model(x).argmax(dim=1)


def fit_regression(x: torch.Tensor, target: torch.Tensor, epochs: int = 8) -> int:
    """A linear fit in batches of BATCH; returns its final loss in hundredths."""
    model = nn.Linear(x.shape[1], 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(epochs):
        for start in range(0, len(x), BATCH):
            optimizer.zero_grad()
            batch = slice(start, start + BATCH)
            loss = nn.functional.mse_loss(model(x[batch]).squeeze(1), target[batch])
            loss.backward()
            optimizer.step()
    return int(loss.item() * 100)


class Tagger(nn.Module):
    def __init__(self, hidden: int = 6) -> None:
        super().__init__()
        self.rnn = nn.GRU(4, hidden, batch_first=True)
        self.out = nn.Linear(hidden, 2)
        self.hidden = hidden

    def forward(self, x: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        output, _ = self.rnn(x, state)
        return self.out(output)


def fit_tagger(x: torch.Tensor, y: torch.Tensor, epochs: int = 2) -> Tagger:
    model = Tagger()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    loader = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True)
    state = torch.zeros(1, 8, model.hidden)
    for _ in range(epochs):
        for xb, yb in loader:
            optimizer.zero_grad()
            logits = model(xb, state)
            nn.functional.cross_entropy(logits.reshape(-1, 2), yb.reshape(-1)).backward()
            optimizer.step()
    return model


def fit_classifier(x: torch.Tensor, y: torch.Tensor, steps: int = 10) -> nn.Module:
    model = nn.Linear(x.shape[1], 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    for _ in range(steps):
        optimizer.zero_grad()
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
    return model


def fit_noisy(x: torch.Tensor, y: torch.Tensor, steps: int = 10) -> nn.Module:
    """The classifier on inputs with noise added (the noise drawn by the caller)."""
    model = nn.Linear(x.shape[1], 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    for _ in range(steps):
        optimizer.zero_grad()
        logits = model(x)
        nn.functional.cross_entropy(logits, y).backward()
        optimizer.step()
    return model
