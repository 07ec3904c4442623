"""Functional style: torch.nn.functional losses, a hand-written step, SGD with momentum."""

import torch
import torch.nn.functional as F
from torch import nn


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(16, 32)
        self.out = nn.Linear(32, 4)

    def forward(self, x):
        x = F.relu(self.hidden(x))
        x = F.dropout(x, p=0.1, training=self.training)
        return self.out(x)


def train(model, optimizer, batches, device):
    model.train()
    for x, y in batches:
        x = x.to(device)
        y = y.to(device)
        optimizer.zero_grad()
        log_probs = F.log_softmax(model(x), dim=1)
        loss = F.nll_loss(log_probs, y)
        loss.backward()
        optimizer.step()


def evaluate(model, batches, device):
    model.eval()
    with torch.no_grad():
        losses = [F.cross_entropy(model(x.to(device)), y.to(device)).item() for x, y in batches]
    return sum(losses) / len(losses)


def main():
    torch.manual_seed(0)
    device = torch.device("cpu")
    model = MLP().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x = torch.randn(128, 16)
    y = x[:, :4].argmax(1)
    batches = [(x[i : i + 32], y[i : i + 32]) for i in range(0, 128, 32)]
    for _ in range(5):
        train(model, optimizer, batches, device)
    print("val loss", evaluate(model, batches, device))


if __name__ == "__main__":
    main()
