"""Writes data/train.bin, data/dev.bin (uint16 character ids) and data/meta.pkl: town-like
names made of syllables, one per line, nothing downloaded."""

import os
import pickle
import random

import numpy as np

rng = random.Random(0)
heads = ["al", "ber", "dorf", "eich", "feld", "gar", "hau", "kirch", "lin", "mun", "ober", "ros"]
tails = ["ach", "au", "berg", "bruck", "dorf", "hausen", "heim", "ing", "kirchen", "stadt"]
names = [
    rng.choice(heads) + rng.choice(heads[:6]) * rng.randint(0, 1) + rng.choice(tails)
    for _ in range(3000)
]
text = "\n".join(names) + "\n"
chars = sorted(set(text))
stoi = {ch: i for i, ch in enumerate(chars)}
ids = np.array([stoi[c] for c in text], dtype=np.uint16)
split = int(0.9 * len(ids))
os.makedirs("data", exist_ok=True)
ids[:split].tofile(os.path.join("data", "train.bin"))
ids[split:].tofile(os.path.join("data", "dev.bin"))
with open(os.path.join("data", "meta.pkl"), "wb") as f:
    pickle.dump({"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": stoi}, f)
