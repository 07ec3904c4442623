"""Town-name GPT: a trainer class that loads binary splits, evaluates every few steps under
@torch.no_grad() and prints "loss after N iterations: train_loss X; eval_loss Y"."""

import argparse
import os
import pickle

import numpy as np
import torch
import torch.optim as Optim

from config import GPTconfig, TrainConfig
from model import GPT


class NameTrainer:
    def __init__(self, train_config: TrainConfig, model_config: GPTconfig):
        self.train_config = train_config
        self.model_config = model_config
        self.device = train_config.device
        self.train_split, self.dev_split = self._load_data()
        self.model = GPT(self.model_config).to(self.device)
        self.optim = Optim.Adam(self.model.parameters(), lr=train_config.learning_rate)
        total = sum(p.nelement() for p in self.model.parameters())
        print(f"Model parameters: {total:,}")

    def _load_data(self):
        data_dir = self.train_config.data_dir
        train = np.memmap(os.path.join(data_dir, "train.bin"), dtype=np.uint16, mode="r")
        dev = np.memmap(os.path.join(data_dir, "dev.bin"), dtype=np.uint16, mode="r")
        with open(os.path.join(data_dir, "meta.pkl"), "rb") as f:
            meta = pickle.load(f)
        self.model_config.vocab_size = meta["vocab_size"]
        return torch.from_numpy(train.astype(np.int64)), torch.from_numpy(dev.astype(np.int64))

    def _get_batch(self, split):
        context = self.model_config.context_len
        starts = torch.randint(0, len(split) - context, (self.train_config.batch_size,))
        x = torch.stack([split[t : t + context] for t in starts])
        y = torch.stack([split[t + 1 : t + context + 1] for t in starts])
        return x.to(self.device), y.to(self.device)

    @torch.no_grad()
    def check_loss(self):
        self.model.eval()
        out = {}
        for name, split in (("train", self.train_split), ("dev", self.dev_split)):
            losses = torch.zeros(self.train_config.eval_iter)
            for i in range(self.train_config.eval_iter):
                x, y = self._get_batch(split)
                _, loss = self.model(x, y)
                losses[i] = loss.item()
            out[name] = losses.mean()
        self.model.train()
        return out

    def train_model(self):
        torch.manual_seed(self.train_config.seed)
        for i in range(self.train_config.train_iter):
            if i % self.train_config.eval_interval == 0:
                losses = self.check_loss()
                print(
                    f"loss after {i} iterations: train_loss {losses['train']:.5f}; "
                    f"eval_loss {losses['dev']:.5f}"
                )
            xb, yb = self._get_batch(self.train_split)
            _, loss = self.model(xb, yb)
            self.optim.zero_grad()
            loss.backward()
            self.optim.step()
        final = self.check_loss()
        print(f"Final losses: train_loss {final['train']:.5f}; eval_loss {final['dev']:.5f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=TrainConfig.seed)
    parser.add_argument("--train_iter", type=int, default=TrainConfig.train_iter)
    args = parser.parse_args()
    train_config = TrainConfig(seed=args.seed, train_iter=args.train_iter)
    trainer = NameTrainer(train_config, GPTconfig())
    trainer.train_model()


if __name__ == "__main__":
    main()
