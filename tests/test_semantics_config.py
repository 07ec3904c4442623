"""Hyperparameters in config objects (mutator.semantics.config, issue 22)."""

from __future__ import annotations

from mutator import SourceFile
from mutator.semantics.config import config_settings

SCRIPT = """
import argparse
from dataclasses import dataclass

@dataclass
class Args:
    learning_rate: float = 2.5e-4
    batch_size: int = 0          # filled at run time below
    weight_decay: float = 0.1    # never read: no setting

parser = argparse.ArgumentParser()
parser.add_argument("--dropout", type=float, default=0.5)
parser.add_argument("--batch-size", type=int, default=64)
args = tyro.cli(Args)
args.batch_size = int(args.num_envs * args.num_steps)
opts = parser.parse_args()
GPT_CONFIG = {"drop_rate": 0.1, "emb_dim": 768}
model = GPTModel(GPT_CONFIG)
cfg.trainer.lr = 3e-4
trainer = Trainer(model, cfg)
print(args.learning_rate, opts.dropout, opts.batch_size)
"""


def _found(kind: str) -> list[tuple[str, str]]:
    source = SourceFile(SCRIPT)
    ctx = source.context
    return [(s.field, ctx.code(s.value)) for s in config_settings(ctx, kind)]


def test_each_kind_of_config_object_is_found_where_the_script_reads_it_back():
    assert _found("lr") == [("learning_rate", "2.5e-4"), ("lr", "3e-4")]
    assert _found("dropout") == [("drop_rate", "0.1"), ("dropout", "0.5")]
    # The dataclass field filled at run time is no setting; the argparse default is.
    assert _found("batch_size") == [("batch_size", "64")]
    assert _found("weight_decay") == []  # written, never read
