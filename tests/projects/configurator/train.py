"""A bigram language model, configured like nanoGPT (defaults here, overrides from argv)."""

import os

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

# -----------------------------------------------------------------------------
dataset = "tiny"
batch_size = 8
block_size = 16
max_iters = 100
learning_rate = 0.1
device = "cuda"
seed = 1337
exec(open("configurator.py").read())  # overrides from command line or config file
# -----------------------------------------------------------------------------

torch.manual_seed(seed)
data = np.memmap(os.path.join("data", dataset, "train.bin"), dtype=np.uint16, mode="r")
vocab_size = int(data.max()) + 1


def get_batch():
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([torch.from_numpy(data[i : i + block_size].astype(np.int64)) for i in ix])
    y = torch.stack(
        [torch.from_numpy(data[i + 1 : i + 1 + block_size].astype(np.int64)) for i in ix]
    )
    return x.to(device), y.to(device)


class Bigram(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.Embedding(vocab_size, vocab_size)

    def forward(self, idx, targets):
        logits = self.table(idx)
        loss = F.cross_entropy(logits.view(-1, vocab_size), targets.view(-1))
        return logits, loss


model = Bigram().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
for it in range(max_iters):
    xb, yb = get_batch()
    _, loss = model(xb, yb)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    if it % 10 == 0:
        print(f"iter {it}: loss {loss.item():.4f}")
os.makedirs("out", exist_ok=True)
torch.save({"model": model.state_dict(), "iter": max_iters}, os.path.join("out", "ckpt.pt"))
