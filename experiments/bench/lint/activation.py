"""Two weight layers with nothing nonlinear between them, in a Sequential or a forward."""

from __future__ import annotations

import libcst as cst

from experiments.bench.lint.layers import Flow, Layers, layer_table
from experiments.bench.lint.rule import LintRule, Report
from experiments.bench.lint.script import Script
from mutator.semantics import callee_name


class DenseLayersWithoutActivation(LintRule):
    """Two Linear (or Conv) layers with only dropout, BatchNorm or pooling between them, in
    an ``nn.Sequential`` or along a model's ``forward`` (``x = self.fc1(x); x =
    self.dropout(x); return self.fc2(x)``), or side by side in one Sequential: a hidden
    layer without its activation, the two collapse into one linear map. Reported at the
    first layer.

    Medium confidence: a deliberate bottleneck with dropout in it exists. Silent for two
    modules that meet directly (an autoencoder's encoder into its decoder, a projection
    into a classifier).
    Silent for deliberate linear factorizations (``nn.Linear(..., bias=False)`` as in LoRA
    or a low-rank head, grouped or 1xk convolutions as in separable convs), across LayerNorm,
    adaptive pooling, PixelShuffle or Upsample, across anything it cannot resolve (a custom
    block, ``self.act`` from a dict, residual sums, matmuls), and across branches: a value
    only counts when every path gives it."""

    code = "TW607"
    category = "numerics"
    summary = "Linear after Linear"
    operators = ("drop_activation",)
    confidence = "medium"
    invalid = (
        """
        from torch import nn
        m = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))  # <-
        """,
        """
        from torch import nn
        m = nn.Sequential(
            nn.Linear(30, 32),  # <-
            nn.Dropout(0.2),
            nn.Linear(32, 1),
        )
        """,
        """
        import torch
        from torch import nn
        import torch.nn.functional as F
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = nn.Linear(64, 32)
                self.fc2 = nn.Linear(32, 10)
            def forward(self, x):
                x = self.fc1(x)  # <-
                x = F.dropout(x, p=0.1, training=self.training)
                return self.fc2(x)
        """,
        """
        from torch import nn
        class CNN(nn.Module):
            def __init__(self):
                super().__init__()
                self.features = nn.Sequential(
                    nn.Conv2d(1, 16, 3), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                    nn.Conv2d(16, 32, 3),  # <-
                    nn.BatchNorm2d(32),
                    nn.MaxPool2d(2),
                )
                self.head = nn.Linear(128, 10)
            def forward(self, x):
                x = self.features(x)
                x = x.view(x.size(0), -1)
                return self.head(x)
        """,
    )
    valid = (
        """
        from torch import nn
        m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        """,
        """
        from torch import nn
        class LoRALinear(nn.Module):
            def __init__(self, d, r):
                super().__init__()
                self.base = nn.Linear(d, d)
                self.lora_A = nn.Linear(d, r, bias=False)
                self.lora_B = nn.Linear(r, d, bias=False)
            def forward(self, x):
                return self.base(x) + self.lora_B(self.lora_A(x))
        """,
        """
        from torch import nn
        class Head(nn.Module):
            def __init__(self, d, vocab):
                super().__init__()
                self.embed = nn.Embedding(vocab, d)
                self.proj = nn.Linear(d, d)
                self.ln = nn.LayerNorm(d)
                self.out = nn.Linear(d, vocab)
            def forward(self, idx):
                h = self.proj(self.embed(idx))
                return self.out(self.ln(h))
        """,
        """
        from torch import nn
        class VAE(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = nn.Linear(64, 128)
                self.fc21 = nn.Linear(128, 8)
                self.fc22 = nn.Linear(128, 8)
                self.fc3 = nn.Linear(8, 128)
                self.act = ACTIVATIONS[cfg.act]
            def forward(self, x, sample):
                h = self.act(self.fc1(x))
                mu, logvar = self.fc21(h), self.fc22(h)
                if sample:
                    z = self.fc3(mu)
                else:
                    z = self.fc3(logvar.exp())
                return z
        """,
        """
        from torch import nn
        sep = nn.Sequential(
            nn.Conv2d(32, 32, 3, padding=1, groups=32),
            nn.Conv2d(32, 64, 1),
            nn.BatchNorm2d(64),
            nn.ReLU(),
        )
        up = nn.Sequential(nn.Conv2d(64, 256, 3, padding=1), nn.PixelShuffle(2), nn.Conv2d(64, 3, 3))
        """,
        """
        from torch import nn
        class AutoEncoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 32))
                self.decoder = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 784))
                self.proj = nn.Linear(32, 16)
                self.classify = nn.Linear(16, 10)
            def forward(self, x):
                z = self.encoder(x)
                logits = self.classify(self.proj(z))
                return self.decoder(z), logits
        """,
        """
        from torch import nn
        class Block(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.fc = nn.Linear(d, d)
                self.proj = nn.Linear(d, d)
            def forward(self, x):
                x = x + self.fc(x)
                return self.proj(x)
        """,
    )

    def check(self, script: Script) -> Report:
        layers = Layers(script)
        for call in script.calls:  # every Sequential, wherever it is built
            if callee_name(call) == "Sequential":
                layers.block(call)
        for cls in script.ctx.nodes(cst.ClassDef):
            table = layer_table(script, cls, layers)
            for method in cls.body.body:
                if isinstance(method, cst.FunctionDef):
                    Flow(layers, table).run(method.body.body, {})
        seen: set[int] = set()
        for first, second in layers.pairs:
            at = first.at or first.node
            if id(at) not in seen:
                seen.add(id(at))
                line = script.position(second.at or second.node)[0]
                yield (
                    at,
                    f"{callee_name(first.node)} feeds {callee_name(second.node)} (line {line}) "
                    "with no activation between: the two collapse into one linear map",
                )
