"""Hand-written SGD regression, tutorial style: no torch.optim, the update and the gradient
reset written out under torch.no_grad(), on scikit-learn's diabetes data standardised with
training statistics."""

import argparse

import torch
import torch.nn.functional as F
from sklearn.datasets import load_diabetes

lr = 0.05
batch_size = 32


class Regressor(torch.nn.Module):
    def __init__(self, n_features, hidden=32):
        super().__init__()
        self.hidden = torch.nn.Linear(n_features, hidden)
        self.out = torch.nn.Linear(hidden, 1)

    def forward(self, x):
        return self.out(torch.tanh(self.hidden(x)))


def load(seed):
    x, y = load_diabetes(return_X_y=True)
    x = torch.tensor(x, dtype=torch.float32)
    y = torch.tensor(y, dtype=torch.float32)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
    train_idx, val_idx = order[:350], order[350:]
    x_mean, x_std = x[train_idx].mean(0), x[train_idx].std(0)
    y_mean, y_std = y[train_idx].mean(), y[train_idx].std()
    x = (x - x_mean) / x_std
    y = (y - y_mean) / y_std
    return x[train_idx], y[train_idx], x[val_idx], y[val_idx]


def main():
    parser = argparse.ArgumentParser(description="Hand-written SGD on diabetes")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    x_train, y_train, x_val, y_val = load(args.seed)
    model = Regressor(x_train.shape[1])

    for epoch in range(args.epochs):
        perm = torch.randperm(len(x_train))
        total = 0.0
        for start in range(0, len(x_train), batch_size):
            idx = perm[start : start + batch_size]
            prediction = model(x_train[idx])
            loss = F.mse_loss(prediction, y_train[idx].unsqueeze(1))
            loss.backward()
            with torch.no_grad():
                for param in model.parameters():
                    param.data.add_(-lr * param.grad)
                    param.grad.zero_()
            total += loss.item() * len(idx)
        with torch.no_grad():
            val_loss = F.mse_loss(model(x_val), y_val.unsqueeze(1)).item()
        print(f"epoch {epoch} train loss {total / len(x_train):.4f} val loss {val_loss:.4f}")


if __name__ == "__main__":
    main()
