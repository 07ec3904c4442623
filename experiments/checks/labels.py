"""Labels line up with their inputs.

A shifted or shuffled pairing leaves every label valid and every input valid: only the
relation between them is gone. So the check measures the relation: a nearest-neighbour
predictor on the inputs (no training, deterministic) must predict the labels far better
than it predicts the same labels shuffled. That is a permutation test with a margin: the
true pairing's score must stand ``min_z`` standard deviations above the mean score of
``permutations`` shuffled pairings. A broken pairing is just one more shuffle, so its z is
about standard normal and passes z >= 4 with probability near 1e-4 (a plain "beats every
shuffle" rule with 20 shuffles lets 1 in 21 through). A correct data set fails only when
its inputs say little about its labels to a nearest neighbour (raw pixels of large
natural images, say): then pass inputs in a feature space where they do.

Language models pair a sequence with itself shifted by one; ``check_next_token_targets``
checks that shift exactly.
"""

from __future__ import annotations

import torch

from experiments.checks._common import fail, seeded


def _features(inputs: torch.Tensor) -> torch.Tensor:
    """Inputs flattened and standardized per feature, so no feature's scale dominates."""
    x = inputs.detach().reshape(inputs.size(0), -1).float()
    std = x.std(dim=0)
    return (x - x.mean(dim=0)) / torch.where(std > 0, std, torch.ones_like(std))


def _scores(neighbours: torch.Tensor, targets: torch.Tensor, classify: bool) -> torch.Tensor:
    """Leave-one-out skill of the neighbour predictor, one score per row of ``targets``.

    ``targets`` is (pairings, n) or (pairings, n, d). Classification: accuracy of the
    nearest neighbour's label. Regression: minus the squared error of the mean of the
    k neighbours' targets. Higher is better in both.
    """
    picked = targets[:, neighbours]  # (pairings, n, k[, d])
    if classify:
        return (picked[:, :, 0] == targets).float().mean(dim=1)
    predicted = picked.float().mean(dim=2)
    error = (predicted - targets.float()).pow(2)
    return -error.reshape(error.size(0), -1).mean(dim=1)


def check_labels_aligned(
    inputs: torch.Tensor,
    targets: torch.Tensor,
    *,
    permutations: int = 50,
    min_z: float = 4.0,
    k: int = 5,
    seed: int = 0,
) -> float:
    """Each label belongs to its input: the pairing is predictable, a shuffled one is not.

    ``inputs`` (n, ...) and ``targets`` (n,) or (n, d), as many samples as you can spare
    from the training set (a few hundred; at least 20), exactly as the loader yields them.
    Integer targets are classes (1-nearest-neighbour accuracy); float targets are values
    (mean of ``k`` neighbours, squared error). The true pairing's score must lie at least
    ``min_z`` standard deviations above the scores of ``permutations`` shuffles of the
    targets. Returns that z. Catches: labels
    shifted by one, shuffled apart from their inputs, taken from another split or order,
    inputs and labels sorted differently. Cannot catch: partial label noise (30% wrong
    labels keep the relation), a relation a nearest neighbour on raw inputs cannot see
    (then it fails on correct data: use inputs in a feature space where it can).
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not the check's
    n = inputs.size(0)
    if targets.size(0) != n:
        raise fail(
            "check_labels_aligned",
            "as many labels as inputs",
            f"{n} inputs and {targets.size(0)} labels",
        )
    if n < 20:
        raise ValueError(f"check_labels_aligned needs at least 20 samples; got {n}")
    classify = not targets.is_floating_point()
    x = _features(inputs)
    distances = torch.cdist(x, x)
    distances.fill_diagonal_(float("inf"))  # leave-one-out: a sample is not its own neighbour
    neighbours = distances.topk(1 if classify else min(k, n - 1), largest=False).indices
    y = targets.detach().reshape(n, -1) if targets.dim() > 1 else targets.detach()
    with seeded(seed):
        shuffles = torch.stack([y[torch.randperm(n)] for _ in range(permutations)])
    true_score, *shuffled = _scores(neighbours, torch.cat([y[None], shuffles]), classify).tolist()
    spread = torch.tensor(shuffled)
    mean, std = spread.mean().item(), spread.std().item()
    z = (true_score - mean) / std if std > 0 else (float("inf") if true_score > mean else 0.0)
    if z >= min_z:
        return z
    metric = "accuracy" if classify else "minus squared error"
    raise fail(
        "check_labels_aligned",
        f"labels predictable from their inputs: a nearest-neighbour {metric} at least "
        f"{min_z:g} standard deviations above that of {permutations} shuffled pairings",
        f"{true_score:.3g} against {mean:.3g} ± {std:.2g} for shuffled labels (z = {z:.1f})",
        "The labels look unrelated to their inputs: shifted by one, shuffled separately, "
        "indexed with another permutation or taken from another split.",
    )


def check_next_token_targets(inputs: torch.Tensor, targets: torch.Tensor) -> None:
    """Language-model targets are the inputs shifted by one position.

    ``inputs`` and ``targets`` are (batch, time) token ids, as the loader yields them:
    ``targets[:, t]`` must equal ``inputs[:, t + 1]``. Catches: targets equal to the
    inputs (the model learns to copy), shifted the wrong way or by two, windows cut from
    different places. Cannot catch: the last target of each window being wrong (it is
    not in the inputs), a tokenizer mismatch.
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not the check's
    if inputs.shape != targets.shape or inputs.dim() != 2 or inputs.size(1) < 2:
        raise fail(
            "check_next_token_targets",
            "inputs and targets of the same (batch, time) shape, time >= 2",
            f"{tuple(inputs.shape)} and {tuple(targets.shape)}",
        )
    match = targets[:, :-1] == inputs[:, 1:]
    if bool(match.all()):
        return
    same = bool((targets == inputs).all())
    raise fail(
        "check_next_token_targets",
        "targets[:, t] == inputs[:, t + 1] at every position",
        f"{(~match).sum().item()} of {match.numel()} positions differ"
        + (" (the targets equal the inputs)" if same else ""),
        "The targets must be the next tokens: chunk[1:] against chunk[:-1], or "
        "source[i + 1 : i + 1 + n] against source[i : i + n].",
    )
