"""A trainer class for a two-head classifier on generated, imbalanced data: an
alpha-balanced focal loss for each of two binary attributes, a cross-entropy head for the
class, running train and validation sums kept on the trainer."""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class FocalLoss(nn.Module):
    def __init__(self, alpha=0.25, gamma=2.0):
        super().__init__()
        self.alpha, self.gamma = alpha, gamma

    def forward(self, logits, target):
        p = torch.sigmoid(logits)
        p_t = torch.where(target == 1, p, 1 - p).clamp(min=1e-6)
        fl = -((1 - p_t) ** self.gamma) * torch.log(p_t)
        fl = torch.where(target == 1, fl * self.alpha, fl * (1 - self.alpha))
        return fl.mean()


class TwoHeadNet(nn.Module):
    def __init__(self, n_in, n_classes):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(n_in, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.head_a = nn.Linear(64, 1)
        self.head_b = nn.Linear(64, 1)
        self.head_c = nn.Linear(64, n_classes)

    def forward(self, x):
        h = self.body(x)
        return self.head_a(h).squeeze(1), self.head_b(h).squeeze(1), self.head_c(h)


def make_data(n, w, generator):
    x = torch.randn(n, w.size(0), generator=generator)
    y_c = (x @ w).argmax(1)
    y_a = (x[:, 0] > 1.0).float()  # about 16% positives
    y_b = (x[:, 1] + x[:, 2] > 1.5).float()
    return TensorDataset(x, y_a, y_b, y_c)


class Trainer:
    def __init__(self, model, lr):
        self.model = model
        self.criterion = FocalLoss()
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.loss_train = 0.0
        self.loss_val = 0.0
        self.acc_train = 0.0
        self.acc_val = 0.0

    def _train(self, loader):
        self.model.train()
        self.loss_train, self.acc_train = 0.0, 0.0
        for x, y_a, y_b, y_c in loader:
            out_a, out_b, logits = self.model(x)
            loss_a = self.criterion(out_a, y_a)
            loss_b = self.criterion(out_b, y_b)
            loss = loss_a + loss_b + F.cross_entropy(logits, y_c)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            self.loss_train += loss.item()
            self.acc_train += (logits.argmax(1) == y_c).float().mean().item()
        self.loss_train /= len(loader)
        self.acc_train /= len(loader)

    def _val(self, loader):
        self.model.eval()
        self.loss_val, self.acc_val = 0.0, 0.0
        with torch.no_grad():
            for x, y_a, y_b, y_c in loader:
                out_a, out_b, logits = self.model(x)
                loss = F.cross_entropy(logits, y_c)
                logits = torch.softmax(logits, dim=1)
                self.loss_val += loss.item()
                self.acc_val += (logits.argmax(1) == y_c).float().mean().item()
        self.loss_val /= len(loader)
        self.acc_val /= len(loader)


def main():
    parser = argparse.ArgumentParser(description="two-head classifier with a focal loss")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    w = torch.randn(10, 4, generator=generator)
    train_ds, val_ds = make_data(2048, w, generator), make_data(512, w, generator)
    train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
    val_loader = DataLoader(val_ds, batch_size=256)
    trainer = Trainer(TwoHeadNet(10, 4), args.lr)
    for epoch in range(args.epochs):
        trainer._train(train_loader)
        trainer._val(val_loader)
        print(
            f"epoch {epoch} train loss {trainer.loss_train:.4f} val loss {trainer.loss_val:.4f} "
            f"val acc {trainer.acc_val:.3f}"
        )


if __name__ == "__main__":
    main()
