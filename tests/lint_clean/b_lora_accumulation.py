"""Correct: a small transformer classifier with LoRA adapters (bias-free low-rank factors),
functional dropout that follows eval(), attention softmax over keys, AdamW with parameter
groups and a grokking-size decay, gradient accumulation, seeding through a local helper."""

import math
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SEED = 1234
ACCUM_STEPS = 4
WEIGHT_DECAY = 1.0  # grokking-style decoupled decay
D_MODEL, RANK, N_CLASSES = 64, 4, 5


def set_seed(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class LoRALinear(nn.Module):
    def __init__(self, d_in, d_out, rank, alpha=8.0):
        super().__init__()
        self.base = nn.Linear(d_in, d_out)
        self.lora_a = nn.Linear(d_in, rank, bias=False)
        self.lora_b = nn.Linear(rank, d_out, bias=False)
        nn.init.zeros_(self.lora_b.weight)
        self.scale = alpha / rank

    def forward(self, x):
        return self.base(x) + self.lora_b(self.lora_a(x)) * self.scale


class Attention(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.qkv = LoRALinear(d, 3 * d, RANK)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        att = F.softmax(att, dim=-1)
        att = F.dropout(att, p=0.1, training=self.training)
        return self.proj(att @ v)


class Classifier(nn.Module):
    def __init__(self, vocab=100):
        super().__init__()
        self.embed = nn.Embedding(vocab, D_MODEL)
        self.attn = Attention(D_MODEL)
        self.norm = nn.LayerNorm(D_MODEL)
        self.head = nn.Linear(D_MODEL, N_CLASSES)

    def forward(self, idx):
        h = self.embed(idx)
        h = h + self.attn(self.norm(h))
        return self.head(self.norm(h).mean(dim=1))


def main():
    set_seed(SEED)
    model = Classifier()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": WEIGHT_DECAY},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=1e-3, weight_decay=WEIGHT_DECAY)
    tokens = torch.randint(0, 100, (256, 16))
    labels = torch.randint(0, N_CLASSES, (256,))
    model.train()
    optimizer.zero_grad()
    for step in range(64):
        idx = torch.randint(0, 256, (32,))
        logits = model(tokens[idx])
        loss = F.cross_entropy(logits, labels[idx])
        running = loss.item()
        loss = loss / ACCUM_STEPS
        loss.backward()
        if (step + 1) % ACCUM_STEPS == 0:
            optimizer.step()
            optimizer.zero_grad()
            print(f"step {step} loss {running:.4f}")


if __name__ == "__main__":
    main()
