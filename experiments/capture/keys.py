"""What a logged number is, read from its name: split, kind and direction.

A name is a TensorBoard tag (``Loss/val``), a wandb or Lightning key (``val_acc``), or
the words before a number on a printed line (``valid loss``, ``Test set: Average
loss``). It is cut into lower-case tokens (camelCase, ``_``, ``/``, ``-``, ``.`` and
spaces split; ``acc@1`` stays one token) and read as:

- split: ``val`` (val, valid, validation, dev, eval, evaluation), ``test`` (test,
  testing) or ``train`` (train, training); None when the name says none;
- kind: ``loss`` (loss, nll, xent, ce), ``accuracy`` (acc, accuracy, top1, acc1,
  acc@1, prec1, prec@1), ``perplexity`` (ppl, perplexity), or another known metric
  whose direction is known (``f1``, ``auc``, ``r2``, ``bleu``, ``top5``... higher is
  better; ``mae``, ``mse``, ``rmse``, ``error``, ``wer``, ``bpc``... lower is better).

A name with a word that makes the number something else (``lr``, ``time``, ``best``,
``grad``, ``max``...) is not a metric: ``best val loss 0.3`` is the best so far, not
this evaluation's, and ``lr 0.001`` is a setting. ``strict`` (printed lines) takes the
kind only from the last two words, so ``val_loss improved from 0.52`` does not read
0.52 as a loss; a tag or a dict key (not strict) may hold the kind anywhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

SPLITS = {
    "val": "val",
    "valid": "val",
    "validation": "val",
    "dev": "val",
    "eval": "val",
    "evaluation": "val",
    "test": "test",
    "testing": "test",
    "train": "train",
    "training": "train",
    "trn": "train",
}
LOSS = "loss"
ACCURACY = "accuracy"
PERPLEXITY = "perplexity"
KINDS = {
    **dict.fromkeys(("loss", "nll", "xent", "ce"), LOSS),
    **dict.fromkeys(("acc", "accuracy", "top1", "acc1", "acc@1", "prec1", "prec@1"), ACCURACY),
    **dict.fromkeys(("ppl", "perplexity"), PERPLEXITY),
}
# Other metrics whose direction is known: True when higher is better.
OTHER = {
    **dict.fromkeys(
        ("f1", "auc", "auroc", "r2", "bleu", "map", "miou", "iou", "dice", "top5", "acc5"),
        True,
    ),
    "acc@5": True,
    **dict.fromkeys(("mae", "mse", "rmse", "error", "err", "wer", "cer", "bpc", "bpb"), False),
}
# Direction of each kind (None: not a kind).
HIGHER_IS_BETTER = {LOSS: False, ACCURACY: True, PERPLEXITY: False}
# Any of these words makes the number something other than an evaluation's result.
NOT_A_METRIC = frozenset(
    {
        "lr",
        "learning",
        "rate",
        "time",
        "ms",
        "sec",
        "secs",
        "seconds",
        "elapsed",
        "eta",
        "mfu",
        "throughput",
        "tokens",
        "samples",
        "norm",
        "grad",
        "gradient",
        "momentum",
        "decay",
        "wd",
        "best",
        "min",
        "max",
        "prev",
        "previous",
        "old",
        "target",
        "expected",
        "chance",
        "baseline",
        "random",
        "num",
        "interval",
        "every",
        "patience",
        "threshold",
        "clip",
        "warmup",
        "scale",
        "size",
        "dropout",
        "weight",
    }
)
STEP_WORDS = frozenset({"step", "steps", "iter", "iteration"})
EPOCH_WORDS = frozenset({"epoch", "ep"})
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SPLIT_TOKENS = re.compile(r"[^a-z0-9@]+")


@dataclass(frozen=True)
class Key:
    """What a name says a number is."""

    split: str | None  # "val", "test", "train" or None
    kind: str  # LOSS, ACCURACY, PERPLEXITY or another metric's own name ("f1", "mae")
    higher_is_better: bool


def tokens(name: str) -> tuple[str, ...]:
    """``valLoss/top-1`` -> ('val', 'loss', 'top', '1'); ``Acc@1`` -> ('acc@1',)."""
    spaced = _CAMEL.sub(" ", name).lower().replace("top-1", "top1").replace("top-5", "top5")
    return tuple(token for token in _SPLIT_TOKENS.split(spaced) if token)


def split_of(words: tuple[str, ...]) -> str | None:
    """The last split word among ``words`` (``train_val_loss`` is a val loss)."""
    for word in reversed(words):
        if word in SPLITS:
            return SPLITS[word]
    return None


def _kind_of(word: str) -> tuple[str, bool] | None:
    kind = KINDS.get(word)
    if kind is not None:
        return kind, HIGHER_IS_BETTER[kind]
    if word in OTHER:
        return word, OTHER[word]
    return None


@lru_cache(maxsize=4096)
def classify(name: str, strict: bool = False) -> Key | None:
    """The key of ``name``, or None when it is not a metric (cached: tags repeat)."""
    return classify_words(tokens(name), strict)


def classify_words(words: tuple[str, ...], strict: bool = False) -> Key | None:
    if not words or NOT_A_METRIC.intersection(words):
        return None
    if strict:
        # The kind is the last word, or the one before a trailing split ("loss val").
        last = words[-1]
        found = _kind_of(last)
        if found is None and last in SPLITS and len(words) >= 2:
            found = _kind_of(words[-2])
    else:
        found = next((k for k in map(_kind_of, reversed(words)) if k is not None), None)
    if found is None:
        return None
    kind, higher = found
    return Key(split_of(words), kind, higher)


def counter_of(words: tuple[str, ...]) -> str | None:
    """``"epoch"`` or ``"step"`` when the last word names a counter (``Epoch 3``,
    ``step 250``, ``global_step=40``); a bound or a setting (``max_iters``) is not one."""
    if not words or NOT_A_METRIC.intersection(words):
        return None
    if words[-1] in EPOCH_WORDS:
        return "epoch"
    if words[-1] in STEP_WORDS:
        return "step"
    return None
