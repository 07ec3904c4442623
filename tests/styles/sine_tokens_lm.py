"""Next-token prediction on a quantised sine wave (LLMs-from-scratch style loss): windows
of the series are generated with np.linspace, a small GRU predicts the next bin, and the
loss flattens (batch, tokens, vocab) logits to (batch * tokens, vocab)."""

import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 16
TIME_STEP = 24


def window(step, rng):
    """One window of the series: ``TIME_STEP`` points of [step * pi, (step + 1) * pi)."""
    start, end = step * np.pi, (step + 1) * np.pi
    steps = np.linspace(start, end, TIME_STEP + 1, dtype=np.float32, endpoint=False)
    values = np.sin(steps) + 0.05 * rng.standard_normal(TIME_STEP + 1).astype(np.float32)
    return np.clip(((values + 1.2) / 2.4 * VOCAB).astype(np.int64), 0, VOCAB - 1)


def batch(steps, rng):
    tokens = torch.from_numpy(np.stack([window(step, rng) for step in steps]))
    return tokens[:, :-1], tokens[:, 1:]


class TokenGRU(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, hidden)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, VOCAB)

    def forward(self, tokens):
        h, _ = self.gru(self.embed(tokens))
        return self.out(h)


def calc_loss_batch(input_batch, target_batch, model):
    logits = model(input_batch)
    return F.cross_entropy(logits.flatten(0, 1), target_batch.flatten())


def main():
    parser = argparse.ArgumentParser(description="next-token model of a quantised sine")
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    model = TokenGRU()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    for step in range(args.steps):
        x, y = batch(rng.integers(0, 1000, args.batch_size), rng)
        loss = calc_loss_batch(x, y, model)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 50 == 0:
            print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
