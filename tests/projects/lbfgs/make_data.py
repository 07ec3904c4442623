"""Make traindata.pt: noisy sine waves (as the PyTorch time-sequence example's generator)."""

import numpy as np
import torch

np.random.seed(2)
T, L, N = 20, 100, 20
x = np.empty((N, L), np.int64)
x[:] = np.array(range(L)) + np.random.randint(-4 * T, 4 * T, N).reshape(N, 1)
data = np.sin(x / 1.0 / T).astype("float32")
torch.save(data, open("traindata.pt", "wb"))
