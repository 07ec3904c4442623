"""A fit() library driving a user's model (issue 29's framework-style code): the model comes
in through **kwargs, the library switches modes with its own helper, the loaders take their
options from dicts, and gradients are accumulated over micro-batches, then averaged by
dividing each parameter's .grad before the step."""

import argparse

import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self, n_in=64, n_hidden=64, n_out=10, p=0.2):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(n_in, n_hidden), nn.ReLU(), nn.Dropout(p))
        self.head = nn.Linear(n_hidden, n_out)

    def forward(self, x):
        return self.head(self.body(x))


class Learner:
    def __init__(self, **kwargs):
        self.network = kwargs["model"]
        self.optimizer = torch.optim.SGD(
            self.network.parameters(), lr=kwargs["lr"], momentum=0.9, weight_decay=1e-4
        )
        self.criterion = nn.CrossEntropyLoss()
        self.accumulation_steps = kwargs["accumulation_steps"]

    def _set_training_mode(self, training):
        self.network.train(training)

    def fit(self, train_set, val_set, epochs):
        train_loader = DataLoader(train_set, **{"batch_size": 32, "shuffle": True})
        val_loader = DataLoader(val_set, **{"batch_size": 256})
        for epoch in range(epochs):
            self._set_training_mode(True)
            total = 0.0
            for step, (x, y) in enumerate(train_loader):
                loss = self.criterion(self.network(x), y)
                loss.backward()
                total += loss.item()
                if (step + 1) % self.accumulation_steps == 0:
                    for p in self.network.parameters():
                        p.grad /= self.accumulation_steps
                    self.optimizer.step()
                    self.optimizer.zero_grad()
            val_loss = self.evaluate(val_loader)
            print(f"epoch {epoch} train loss {total / len(train_loader):.4f} val loss {val_loss:.4f}")

    def evaluate(self, loader):
        self._set_training_mode(False)
        total, count = 0.0, 0
        with torch.no_grad():
            for x, y in loader:
                total += self.criterion(self.network(x), y).item() * len(y)
                count += len(y)
        return total / count


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target)
    order = torch.randperm(len(x))
    x, y = x[order], y[order]
    train_set = TensorDataset(x[:1400], y[:1400])
    val_set = TensorDataset(x[1400:], y[1400:])
    learner = Learner(model=Net(), lr=0.1, accumulation_steps=2)
    learner.fit(train_set, val_set, args.epochs)


if __name__ == "__main__":
    main()
