"""Character-level LSTM language model with truncated back-propagation through time (TBPTT).

Task: next-character prediction on the module docstrings of a fixed list of standard-library
modules (about 37 KB, ~95 distinct characters; fixed for a given Python version, nothing
downloaded). First 90% trains, last 10% validates.
Model: Embedding -> 1-layer LSTM -> Dropout -> Linear, written like PyTorch's
word_language_model example: the text is cut into ``batch_size`` parallel streams, the
hidden state is carried from one ``bptt``-long window to the next and detached at each
window (``repackage_hidden``), gradients are clipped by global norm after ``backward()``,
Adam updates, ``nn.CrossEntropyLoss`` on next-character targets.
Expected initial loss: ln V = ln 95 = 4.55 (small logits at init).
Target: val loss well below the unigram entropy of the text (3.33 nats); the default budget
reaches about 2.1.
Default budget: 5 epochs, 32 streams, bptt 32, lr 1e-2 (about 1.5 s on one CPU thread).

Run: ``python reference_loops/lstm_lm.py --epochs 5 --seed 0 --device cpu``
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import random

import numpy as np
import torch
from torch import nn

try:
    from experiments.telemetry import report
except ImportError:  # running without trainwreck installed: metrics go nowhere

    def report(**metrics: float) -> None:
        pass


EPOCHS = 5
BATCH_SIZE = 32
LR = 1e-2
BPTT = 32
CLIP = 1.0
EMBED_DIM = 32
HIDDEN = 128
VAL_FRACTION = 0.1
DOC_MODULES = (
    "argparse", "json", "statistics", "re", "csv", "heapq", "copy", "itertools",
    "random", "subprocess", "io", "struct", "unittest", "typing", "tempfile", "inspect",
    "os", "difflib", "collections", "pprint", "fnmatch", "string", "pickle",
)  # fmt: skip

Hidden = tuple[torch.Tensor, torch.Tensor]


def load_text() -> str:
    return "\n\n".join(inspect.getdoc(importlib.import_module(name)) for name in DOC_MODULES)


def batchify(data: torch.Tensor, n_streams: int) -> torch.Tensor:
    """(N,) ids -> (n_streams, N // n_streams): each row is a contiguous piece of the text."""
    n = len(data) // n_streams * n_streams
    return data[:n].view(n_streams, -1)


def get_batch(source: torch.Tensor, i: int, bptt: int) -> tuple[torch.Tensor, torch.Tensor]:
    seq_len = min(bptt, source.size(1) - 1 - i)
    x = source[:, i : i + seq_len]
    y = source[:, i + 1 : i + 1 + seq_len]
    return x, y


def repackage_hidden(hidden: Hidden) -> Hidden:
    """Cut the graph at the window boundary; keep the values."""
    return tuple(h.detach() for h in hidden)


class CharLSTM(nn.Module):
    def __init__(self, vocab_size: int, embed_dim: int = EMBED_DIM, hidden: int = HIDDEN):
        super().__init__()
        self.hidden_size = hidden
        self.embed = nn.Embedding(vocab_size, embed_dim)
        self.lstm = nn.LSTM(embed_dim, hidden, batch_first=True)
        self.dropout = nn.Dropout(0.2)
        self.head = nn.Linear(hidden, vocab_size)

    def init_hidden(self, n_streams: int, device: torch.device) -> Hidden:
        zeros = torch.zeros(1, n_streams, self.hidden_size, device=device)
        return zeros, zeros.clone()

    def forward(self, x: torch.Tensor, hidden: Hidden) -> tuple[torch.Tensor, Hidden]:
        out, hidden = self.lstm(self.embed(x), hidden)
        out = self.dropout(out)
        return self.head(out), hidden  # (streams, seq_len, vocab) logits


def train_one_epoch(
    model: CharLSTM,
    source: torch.Tensor,
    criterion: nn.Module,
    optimizer: torch.optim.Optimizer,
    device: torch.device,
) -> float:
    model.train()
    total_loss, n_windows = 0.0, 0
    hidden = model.init_hidden(source.size(0), device)
    for i in range(0, source.size(1) - 1, BPTT):
        x, y = get_batch(source, i, BPTT)
        x, y = x.to(device), y.to(device)
        hidden = repackage_hidden(hidden)
        optimizer.zero_grad()
        logits, hidden = model(x, hidden)
        loss = criterion(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=CLIP)
        optimizer.step()
        total_loss += loss.item()
        n_windows += 1
    return total_loss / n_windows


def evaluate(
    model: CharLSTM, source: torch.Tensor, criterion: nn.Module, device: torch.device
) -> tuple[float, float]:
    model.eval()
    total_loss, correct, count = 0.0, 0, 0
    hidden = model.init_hidden(source.size(0), device)
    with torch.no_grad():
        for i in range(0, source.size(1) - 1, BPTT):
            x, y = get_batch(source, i, BPTT)
            x, y = x.to(device), y.to(device)
            logits, hidden = model(x, hidden)
            flat_logits, flat_y = logits.reshape(-1, logits.size(-1)), y.reshape(-1)
            total_loss += criterion(flat_logits, flat_y).item() * flat_y.numel()
            correct += (flat_logits.argmax(dim=1) == flat_y).sum().item()
            count += flat_y.numel()
    return total_loss / count, correct / count


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--lr", type=float, default=LR)
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE, help="parallel streams")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)

    text = load_text()
    vocab = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(vocab)}
    data = torch.tensor([stoi[ch] for ch in text], dtype=torch.long)
    n_train = int(len(data) * (1 - VAL_FRACTION))
    train_data = batchify(data[:n_train], args.batch_size)
    val_data = batchify(data[n_train:], 8)  # fewer, longer streams: less cold-start context

    model = CharLSTM(len(vocab)).to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    for epoch in range(1, args.epochs + 1):
        train_loss = train_one_epoch(model, train_data, criterion, optimizer, device)
        val_loss, val_acc = evaluate(model, val_data, criterion, device)
        report(epoch=epoch, train_loss=train_loss, val_loss=val_loss, val_metric=val_acc)
        print(f"epoch {epoch:3d}  train {train_loss:.4f}  val {val_loss:.4f}  acc {val_acc:.3f}")


if __name__ == "__main__":
    main()
