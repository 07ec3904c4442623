"""Classify two blobs; data from ./data, checkpoint to ./model.pt, logs to ./out/."""

import argparse
import os
import time

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--data", default="data")
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

scale = os.environ.get("BLOBS_SCALE")
if scale is None:
    raise SystemExit("set BLOBS_SCALE (e.g. export BLOBS_SCALE=1.0)")

torch.manual_seed(args.seed)
os.makedirs("out", exist_ok=True)
with open(os.path.join("out", "run.txt"), "w") as log:
    log.write(f"seed {args.seed}\n")

blob = torch.load(os.path.join(args.data, "train.pt"))
x, y = blob["x"] * float(scale), blob["y"]
model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = nn.CrossEntropyLoss()
for epoch in range(args.epochs):
    permutation = torch.randperm(len(x))
    for start in range(0, len(x), 32):
        batch = permutation[start : start + 32]
        optimizer.zero_grad()
        loss = loss_fn(model(x[batch]), y[batch])
        loss.backward()
        optimizer.step()
    time.sleep(0.05)  # long enough for runs of other seeds to overlap with this one
    print(f"epoch {epoch} loss {loss.item():.4f}")

torch.save(model.state_dict(), "model.pt")
with open(os.path.join("out", "run.txt")) as log:
    written = log.read()
if written != f"seed {args.seed}\n":  # another run wrote the same file meanwhile
    raise RuntimeError(f"out/run.txt was changed by someone else: {written!r}")
