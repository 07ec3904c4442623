"""Held-out evaluation of the language-model loops: the last 10% of the text, rebuilt here.

The text is the docstrings of a fixed list of standard-library modules, as in the loops;
the vocabulary is its sorted characters and the held-out part is the last 10%, which the
loops never train on. ``metric`` is next-character accuracy, ``chance`` the share of the
most frequent character (what a model that learned nothing but the counts gets right).
"""

from __future__ import annotations

import importlib
import inspect

import torch
import torch.nn.functional as F
from torch import nn

VAL_FRACTION = 0.1
BLOCK_SIZE = 32  # char_lm's context
BPTT = 32  # lstm_lm's window
STREAMS = 8  # lstm_lm's val streams
DOC_MODULES = (
    "argparse", "json", "statistics", "re", "csv", "heapq", "copy", "itertools",
    "random", "subprocess", "io", "struct", "unittest", "typing", "tempfile", "inspect",
    "os", "difflib", "collections", "pprint", "fnmatch", "string", "pickle",
)  # fmt: skip


def _held_out() -> torch.Tensor:
    text = "\n\n".join(inspect.getdoc(importlib.import_module(name)) for name in DOC_MODULES)
    stoi = {ch: i for i, ch in enumerate(sorted(set(text)))}
    data = torch.tensor([stoi[ch] for ch in text], dtype=torch.long)
    return data[int(len(data) * (1 - VAL_FRACTION)) :]


def _scores(logits: torch.Tensor, targets: torch.Tensor) -> dict[str, float]:
    logits, targets = logits.reshape(-1, logits.size(-1)).float().cpu(), targets.reshape(-1)
    counts = torch.bincount(targets)
    return {
        "metric": float((logits.argmax(dim=1) == targets).float().mean()),
        "loss": float(F.cross_entropy(logits, targets)),
        "chance": float(counts.max()) / len(targets),
    }


def transformer_windows(model: nn.Module, *, seed: int, device: str) -> dict[str, float]:
    """char_lm: non-overlapping windows of 32 characters, targets shifted by one."""
    data = _held_out()
    n = (len(data) - 1) // BLOCK_SIZE
    starts = torch.arange(n) * BLOCK_SIZE
    index = starts[:, None] + torch.arange(BLOCK_SIZE + 1)[None, :]
    chunks = data[index]
    model.eval()
    with torch.no_grad():
        logits = model(chunks[:, :-1].to(device))
    return _scores(logits, chunks[:, 1:])


def lstm_streams(model: nn.Module, *, seed: int, device: str) -> dict[str, float]:
    """lstm_lm: 8 contiguous streams read in 32-step windows, the hidden state carried."""
    data = _held_out()
    n = len(data) // STREAMS * STREAMS
    source = data[:n].view(STREAMS, -1)
    model.eval()
    all_logits, all_targets = [], []
    with torch.no_grad():
        hidden = model.init_hidden(STREAMS, torch.device(device))
        for i in range(0, source.size(1) - 1, BPTT):
            seq_len = min(BPTT, source.size(1) - 1 - i)
            x, y = source[:, i : i + seq_len], source[:, i + 1 : i + 1 + seq_len]
            logits, hidden = model(x.to(device), hidden)
            all_logits.append(logits.reshape(-1, logits.size(-1)))
            all_targets.append(y.reshape(-1))
    return _scores(torch.cat(all_logits), torch.cat(all_targets))
