"""Trains a few steps, then allocates memory without bound (touching every page)."""

import torch
from tiny_common import parse, train

hoard = []


def grow(step, loss):
    if step == 2:
        while True:
            hoard.append(torch.ones(64 * 2**20 // 4))  # 64 MiB a block, all pages touched


if __name__ == "__main__":
    train(parse(), on_step=grow)
