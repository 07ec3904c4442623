"""Padded-batch language model style (the PyTorch seq2seq/NLP tutorials): variable-length
words as character sequences, a collate_fn that pads them with pad_sequence, an Embedding
with padding_idx, a GRU, and CrossEntropyLoss(ignore_index=PAD_IDX) over the padded batch."""

import argparse
import random

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader

WORDS = "the quick brown fox jumps over lazy dogs while seven wizards quietly hex jovial kings".split()
CHARS = sorted(set("".join(WORDS)))
BOS_IDX, EOS_IDX = 0, 1
PAD_IDX = len(CHARS) + 2
VOCAB = len(CHARS) + 3
stoi = {ch: i + 2 for i, ch in enumerate(CHARS)}


def encode(word):
    ids = [stoi[ch] for ch in word]
    return torch.tensor([BOS_IDX] + ids), torch.tensor(ids + [EOS_IDX])


def collate(batch):
    inputs, targets = zip(*batch)
    inputs = pad_sequence(inputs, batch_first=True, padding_value=PAD_IDX)
    targets = pad_sequence(targets, batch_first=True, padding_value=PAD_IDX)
    return inputs, targets


class CharGRU(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32, padding_idx=PAD_IDX)
        self.gru = nn.GRU(32, hidden, batch_first=True)
        self.out = nn.Linear(hidden, VOCAB)

    def forward(self, x):
        emb = self.embed(x)
        output, _ = self.gru(emb)
        return self.out(output)


def run_epoch(model, loader, criterion, optimizer=None):
    total, batches = 0.0, 0
    for inputs, targets in loader:
        logits = model(inputs)
        loss = criterion(logits.view(-1, VOCAB), targets.view(-1))
        if optimizer is not None:
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        total += loss.item()
        batches += 1
    return total / batches


def main():
    parser = argparse.ArgumentParser(description="character GRU on padded word batches")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--samples", type=int, default=1200)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    words = [rng.choice(WORDS) for _ in range(args.samples)]
    split = int(0.8 * len(words))
    train_data = [encode(w) for w in words[:split]]
    val_data = [encode(w) for w in words[split:]]
    train_loader = DataLoader(train_data, batch_size=args.batch_size, shuffle=True, collate_fn=collate)
    val_loader = DataLoader(val_data, batch_size=128, collate_fn=collate)

    model = CharGRU()
    criterion = nn.CrossEntropyLoss(ignore_index=PAD_IDX)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        model.train()
        train_loss = run_epoch(model, train_loader, criterion, optimizer)
        model.eval()
        with torch.no_grad():
            val_loss = run_epoch(model, val_loader, criterion)
        print(f"epoch {epoch} train loss {train_loss:.4f} val loss {val_loss:.4f}")


if __name__ == "__main__":
    main()
