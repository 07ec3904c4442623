"""Linear regression with a hand-written SGD update (no optimizer, no data files)."""

import torch

x = torch.linspace(-1, 1, 128).unsqueeze(1)
y = 3.0 * x + 0.5 + 0.05 * torch.randn_like(x)
w = torch.zeros(1, 1, requires_grad=True)
b = torch.zeros(1, requires_grad=True)
lr = 0.1
for step in range(80):
    loss = ((x @ w + b - y) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        w -= lr * w.grad
        b -= lr * b.grad
        w.grad.zero_()
        b.grad.zero_()
print(f"w={w.item():.3f} b={b.item():.3f} loss={loss.item():.5f}")
