"""Training and model settings as dataclasses, the way small GPT projects keep them."""

from dataclasses import dataclass


@dataclass
class TrainConfig:
    data_dir: str = "data"
    batch_size: int = 16
    eval_iter: int = 4
    eval_interval: int = 25
    train_iter: int = 100
    learning_rate: float = 3e-3
    seed: int = 42
    device: str = "cpu"


@dataclass
class GPTconfig:
    vocab_size: int = 0  # read from data/meta.pkl
    context_len: int = 8
    n_embd: int = 32
    n_head: int = 2
    n_layer: int = 2
    dropout: float = 0.0
