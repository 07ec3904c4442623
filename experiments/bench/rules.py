"""``trainwreck-rules``: rule checks over a run's trace, in the style of AutoTrainer and
DeepDiagnosis.

Every rule is causal: it reads the trace one record at a time and decides from what it
has seen so far, so the step it reports is the optimizer step at which it would have
fired inside the run. That makes the offline checker an honest stand-in for an online
one (``trainwreck-rules-online`` is the same checker, labelled as an online detector).
Thresholds live in ``RulesConfig``; override any of them by keyword.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from typing import Any

from experiments.bench.api import DynamicDetector, Finding, RunInput, register
from experiments.trace import decode_float


@dataclass(frozen=True)
class RulesConfig:
    """Thresholds. Defaults are deliberately loose: a clean run must not fire."""

    vanishing_grad_norm: float = 1e-7  # sampled gradient norm below this ...
    exploding_grad_norm: float = 1e3  # ... or above this ...
    patience: int = 5  # ... for this many consecutive sampled steps
    no_update_ratio: float = 1e-12  # ||delta w|| / ||w|| at or below: the step changed nothing
    loss_window: int = 20  # backward calls per window for the progress rules
    min_steps_for_progress: int = 60  # loss not decreasing is judged from this backward call on
    min_relative_decrease: float = 0.02  # median of the last window vs the first window
    diverge_factor: float = 3.0  # window median above this x the first window: diverging
    oscillation_sign_rate: float = 0.9  # share of sign flips of successive loss differences
    eval_mode_train_fraction: float = 0.5  # training forwards run in eval() mode
    eval_grad_forwards: int = 1  # eval forwards that built a graph
    memory_growth_mb_per_step: float = 0.5  # resident memory slope over the steps seen
    memory_min_steps: int = 50

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> RulesConfig:
        known = {field.name: field.type for field in fields(cls)}
        unknown = set(options) - set(known)
        if unknown:
            raise ValueError(
                f"unknown rules setting {sorted(unknown)[0]!r} (known: {', '.join(known)})"
            )
        base = cls()
        return replace(
            base, **{key: type(getattr(base, key))(value) for key, value in options.items()}
        )


@dataclass(frozen=True)
class RuleSpec:
    name: str
    category: str
    summary: str


RULE_SPECS = {
    spec.name: spec
    for spec in (
        RuleSpec("nan_loss", "numerics", "the loss became NaN or infinite"),
        RuleSpec("vanishing_gradients", "gradient", "the gradient norm stays near zero"),
        RuleSpec("exploding_gradients", "optim", "the gradient norm stays huge"),
        RuleSpec("no_update", "gradient", "optimizer steps do not change the weights"),
        RuleSpec("no_backward", "gradient", "optimizer steps without any backward()"),
        RuleSpec("no_step", "gradient", "backward() calls without any optimizer step"),
        RuleSpec("loss_not_decreasing", "gradient", "the loss does not go down"),
        RuleSpec("diverging", "optim", "the loss grows far above its start"),
        RuleSpec("oscillating", "optim", "the loss zig-zags step after step"),
        RuleSpec("eval_mode_training", "mode", "training forwards run in eval() mode"),
        RuleSpec("grad_in_eval", "mode", "evaluation forwards build autograd graphs"),
        RuleSpec("memory_growth", "gradient", "resident memory grows every step"),
    )
}


class _Checker:
    """Streams one trace; each rule fires at most once, at the step it first holds."""

    def __init__(self, config: RulesConfig) -> None:
        self.config = config
        self.findings: dict[str, Finding] = {}
        self.steps = 0
        self.backwards = 0
        self.losses: list[float] = []
        self.low_streak = 0
        self.high_streak = 0
        self.zero_update_streak = 0
        self.memory: list[tuple[int, float]] = []

    def fire(self, rule: str, message: str) -> None:
        if rule not in self.findings:
            spec = RULE_SPECS[rule]
            self.findings[rule] = Finding(spec.category, None, None, self.steps, message, rule)

    def feed(self, record: dict[str, Any]) -> None:
        kind = record.get("kind")
        if kind == "backward":
            self._on_loss(record, backward=True)
        elif kind == "loss_fn" and self.backwards == 0:
            self._on_loss(record, backward=False)
        elif kind == "step":
            self._on_step(record)
        elif kind in ("forwards", "end"):
            self._on_counters(record)

    def _on_loss(self, record: dict[str, Any], backward: bool) -> None:
        if backward:
            self.backwards += 1
            self.steps = int(record.get("step") or self.steps)
        loss = decode_float(record.get("loss"))
        if loss is None:
            return
        if not math.isfinite(loss):
            self.fire("nan_loss", f"loss {loss} at backward call {self.backwards}")
            return
        self.losses.append(loss)
        self._progress_rules()

    def _progress_rules(self) -> None:
        config, losses = self.config, self.losses
        window = config.loss_window
        n = len(losses)
        if n < 2 * window or n % window:
            return
        first = statistics.median(losses[:window])
        last = statistics.median(losses[-window:])
        if first > 0 and last > config.diverge_factor * first:
            self.fire("diverging", f"loss median {last:.4g} vs {first:.4g} at the start")
        if n >= config.min_steps_for_progress and last > first * (1 - config.min_relative_decrease):
            self.fire(
                "loss_not_decreasing",
                f"loss median {last:.4g} after {n} losses vs {first:.4g} at the start",
            )
        recent = losses[-window:]
        differences = [b - a for a, b in itertools.pairwise(recent) if b != a]
        flips = sum(1 for a, b in itertools.pairwise(differences) if (a > 0) != (b > 0))
        if len(differences) > 2 and flips / (len(differences) - 1) >= config.oscillation_sign_rate:
            self.fire("oscillating", f"{flips} sign flips in the last {window} losses")

    def _on_step(self, record: dict[str, Any]) -> None:
        config = self.config
        self.steps = int(record.get("i") or self.steps + 1)
        if self.backwards == 0 and self.steps >= config.patience:
            self.fire("no_backward", f"{self.steps} optimizer steps and no backward()")
        norm = decode_float(record.get("grad_norm"))
        if norm is not None and math.isfinite(norm):
            self.low_streak = self.low_streak + 1 if norm <= config.vanishing_grad_norm else 0
            self.high_streak = self.high_streak + 1 if norm >= config.exploding_grad_norm else 0
            if self.low_streak >= config.patience:
                self.fire(
                    "vanishing_gradients", f"gradient norm {norm:.3g} for {self.low_streak} steps"
                )
            if self.high_streak >= config.patience:
                self.fire(
                    "exploding_gradients", f"gradient norm {norm:.3g} for {self.high_streak} steps"
                )
        elif norm is not None:
            self.fire("nan_loss", f"gradient norm {norm} at step {self.steps}")
        ratio = decode_float(record.get("update_ratio"))
        if ratio is not None:
            self.zero_update_streak = (
                self.zero_update_streak + 1 if ratio <= config.no_update_ratio else 0
            )
            if self.zero_update_streak >= config.patience:
                self.fire(
                    "no_update", f"update ratio {ratio:.3g} for {self.zero_update_streak} steps"
                )
        rss = decode_float(record.get("cuda_mb")) or decode_float(record.get("rss_mb"))
        if rss is not None:
            self.memory.append((self.steps, rss))
            self._memory_rule()

    def _memory_rule(self) -> None:
        config = self.config
        if len(self.memory) < config.memory_min_steps or len(self.memory) % 10:
            return
        tail = self.memory[len(self.memory) // 10 :]  # skip the warm-up allocations
        xs = [float(s) for s, _ in tail]
        ys = [m for _, m in tail]
        if len(set(xs)) < 2:
            return
        slope = statistics.linear_regression(xs, ys).slope
        if slope >= config.memory_growth_mb_per_step:
            self.fire("memory_growth", f"resident memory grows {slope:.2f} MB per step")

    def _on_counters(self, record: dict[str, Any]) -> None:
        config = self.config
        train = int(record.get("train_forwards") or 0)
        train_eval = int(record.get("train_forwards_eval_mode") or 0)
        if train and train_eval / train >= config.eval_mode_train_fraction:
            self.fire(
                "eval_mode_training", f"{train_eval} of {train} training forwards in eval() mode"
            )
        eval_grad = int(record.get("eval_forwards_grad") or 0)
        if eval_grad >= config.eval_grad_forwards:
            self.fire("grad_in_eval", f"{eval_grad} evaluation forwards with grad enabled")
        if record.get("kind") == "end" and self.backwards >= config.patience and self.steps == 0:
            self.fire("no_step", f"{self.backwards} backward() calls and no optimizer step")


def check_records(
    records: Iterable[dict[str, Any]], config: RulesConfig | None = None
) -> list[Finding]:
    """Findings of every rule over one trace, in the order they fired."""
    checker = _Checker(config or RulesConfig())
    for record in records:
        checker.feed(record)
    return list(checker.findings.values())


@register
class TrainwreckRules(DynamicDetector):
    name = "trainwreck-rules"
    summary = "causal rule checks over the trace (AutoTrainer/DeepDiagnosis style)"
    timeout_s = 30.0
    # The thresholds are fixed; the only graded answer is how many distinct rules fired
    # (flagging at >= 1 is the detector's own operating point, >= 2 a stricter one).
    scored = True

    def __init__(self, **options: Any) -> None:
        self.config = RulesConfig.from_options(options)

    def check_run(self, run: RunInput) -> list[Finding]:
        return check_records(run.records, self.config)

    def suspicion(self, item: RunInput) -> float:  # type: ignore[override]
        return float(len({finding.rule for finding in self.check_run(item)}))


@register
class TrainwreckRulesOnline(TrainwreckRules):
    """The same causal checks, scored as an online detector: the step is when it fired."""

    name = "trainwreck-rules-online"
    kind = "online"
    summary = "trainwreck-rules replayed step by step (fires from the trace prefix only)"
