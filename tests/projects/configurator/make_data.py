"""Make data/tiny/train.bin: tokens of a repetitive text, as uint16 (like nanoGPT)."""

import os

import numpy as np

text = "the quick brown fox jumps over the lazy dog. " * 40
vocab = sorted(set(text))
ids = np.array([vocab.index(ch) for ch in text], dtype=np.uint16)
os.makedirs(os.path.join("data", "tiny"), exist_ok=True)
ids.tofile(os.path.join("data", "tiny", "train.bin"))
