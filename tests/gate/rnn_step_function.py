"""A character-level GRU trained by a step function; the initial hidden state is sized by
the batch size the loader also uses."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class CharRNN(nn.Module):
    def __init__(self, vocab=32, hidden=64, layers=1):
        super().__init__()
        self.layers, self.hidden = layers, hidden
        self.embed = nn.Embedding(vocab, hidden)
        self.gru = nn.GRU(hidden, hidden, layers, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, x, h):
        y, h = self.gru(self.embed(x), h)
        return self.out(y), h

    def init_hidden(self, batch_size):
        return torch.zeros(self.layers, batch_size, self.hidden)


def train_step(model, optimizer, x, y, hidden):
    optimizer.zero_grad()
    logits, _ = model(x, hidden)
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
    loss.backward()
    optimizer.step()
    return loss.item()


@torch.no_grad()
def evaluate(model, loader, hidden):
    model.eval()
    total = sum(F.cross_entropy(model(x, hidden)[0].transpose(1, 2), y).item() for x, y in loader)
    model.train()
    return total / len(loader)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    text = torch.randint(0, 32, (4096 + 1,))
    x, y = text[:-1].view(-1, 32), text[1:].view(-1, 32)
    train_set, val_set = TensorDataset(x[:96], y[:96]), TensorDataset(x[96:], y[96:])
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, drop_last=True)
    val_loader = DataLoader(val_set, batch_size=args.batch_size, drop_last=True)
    model = CharRNN()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    hidden = model.init_hidden(args.batch_size)
    for epoch in range(args.epochs):
        model.train()
        for xb, yb in train_loader:
            loss = train_step(model, optimizer, xb, yb, hidden)
        with torch.no_grad():
            val_loss = evaluate(model, val_loader, hidden)
        print(f"epoch {epoch} train loss {loss:.3f} val loss {val_loss:.3f}")


if __name__ == "__main__":
    main()
