"""Global telemetry hooks, installed in the run's process before the script starts.

Nothing here needs the script's cooperation: a mutant cannot remove what it never sees,
and a third-party script runs unchanged. What is hooked and why that hook:

- ``torch.autograd.backward`` (which ``Tensor.backward`` calls): the loss of every
  backward call. A depth counter keeps a nested call from counting twice.
- global optimizer step pre/post hooks: the step count and time; on step 1 and every
  ``sample_every``-th step after it the global gradient norm and the update/weight ratio,
  from one fused ``torch._foreach_norm`` call over gradients and weights and a weight copy
  into buffers reused across samples.
- ``nn.Module.__call__``: a flag set by the outermost call finds top-level forwards (not
  nested in another module's forward); their output's autograd node gets a prehook. (A wrapper of
  ``__call__`` rather than global forward hooks: any global module hook sends every module
  call down torch's slow hook path, which cost more than the rest of the telemetry.)
  A forward whose output received a gradient is a training forward (and counts as one
  "in eval mode" if the module was in ``eval()``); one that did not by the next optimizer
  step (or the end) is an eval forward, "with grad" if it built a graph for nothing.
- the functional losses in ``torch.nn.functional`` (which the ``nn.*Loss`` modules call):
  the ``loss_fn`` record, so a mutant that never calls ``backward()`` still has a curve.
- RSS from ``/proc/self/statm`` (one ``pread``), CUDA allocator peak when CUDA is in use.

Values on the CPU are read at once (``item()`` costs less than keeping the tensor);
values on an accelerator stay tensors until the writer's batched flush, so there is no
host sync per hook.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from functools import wraps
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.modules import loss as loss_modules
from torch.optim import optimizer as optimizer_hooks

from experiments.harness.writer import TraceWriter

FUNCTIONAL_LOSSES = (
    "cross_entropy",
    "nll_loss",
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "kl_div",
    "poisson_nll_loss",
    "gaussian_nll_loss",
    "soft_margin_loss",
    "multi_margin_loss",
    "margin_ranking_loss",
    "hinge_embedding_loss",
    "cosine_embedding_loss",
    "triplet_margin_loss",
    "ctc_loss",
)
# Gradient norm and update ratio on the first step and every 20th after it: on mlp_digits
# (about 1.3 ms a step on one thread here) sampling every step costs ~13% of step time
# more than sampling every 20th (benchmarks/bench_harness.py).
SAMPLE_EVERY = 20
# loss_fn records kept in full at the start of a run (the initial-loss check reads them).
LOSS_FN_HEAD = 100
PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20


class _Forward:
    """A top-level forward waiting to learn whether its output receives a gradient; it is
    its own autograd prehook (no closure to build per forward)."""

    __slots__ = ("got_grad", "telemetry", "training")

    def __init__(self, telemetry: Telemetry, training: bool) -> None:
        self.telemetry = telemetry
        self.training = training
        self.got_grad = False

    def __call__(self, grad_outputs: Any) -> None:
        if not self.got_grad:
            self.got_grad = True
            self.telemetry.train_forwards += 1
            if not self.training:
                self.telemetry.train_forwards_eval_mode += 1


def _first_tensor(output: Any) -> torch.Tensor | None:
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, (tuple, list)):
        for item in output:
            if isinstance(item, torch.Tensor):
                return item
    elif isinstance(output, dict):
        for item in output.values():
            if isinstance(item, torch.Tensor):
                return item
    return None


class Telemetry:
    def __init__(self, writer: TraceWriter, sample_every: int = SAMPLE_EVERY) -> None:
        self.writer = writer
        self.sample_every = max(1, int(sample_every))
        self.backward_calls = 0
        self.loss_fn_calls = 0
        self.steps = 0
        self.train_forwards = 0
        self.train_forwards_eval_mode = 0
        self.eval_forwards = 0
        self.eval_forwards_grad = 0
        self.peak_cuda_mb: float | None = None
        self._backward_depth = 0
        self._forward_depth = 0
        self._loss_depth = 0
        self._pending_forwards: list[_Forward] = []
        self._last_step_time: float | None = None
        self._before_step: list[torch.Tensor] | None = None
        self._grad_norm: torch.Tensor | None = None
        self._weight_norm = torch.ones(())
        self._copies: dict[int, list[torch.Tensor]] = {}
        self._statm = os.open("/proc/self/statm", os.O_RDONLY) if os.path.exists("/proc") else -1
        self._undo: list[Callable[[], None]] = []
        self._forwards_written: tuple[int, ...] = ()

    # -- installation ---------------------------------------------------------------
    def install(self) -> None:
        # Tensor.backward calls torch.autograd.backward through the module attribute, so
        # one wrapper sees both spellings.
        self._patch(torch.autograd, "backward", self._wrap_backward(torch.autograd.backward))
        for name in FUNCTIONAL_LOSSES:
            if hasattr(F, name):
                self._patch(F, name, self._wrap_loss(getattr(F, name)))
        self._patch(torch.nn.Module, "__call__", self._wrap_call(torch.nn.Module.__call__))
        handles = [
            optimizer_hooks.register_optimizer_step_pre_hook(self._before_optimizer_step),
            optimizer_hooks.register_optimizer_step_post_hook(self._after_optimizer_step),
        ]
        self._undo.extend(handle.remove for handle in handles)
        self.writer.before_flush = self._append_forward_counters

    def remove(self) -> None:
        """Undo ``install`` (for in-process benchmarks; a run's process just ends)."""
        while self._undo:
            self._undo.pop()()

    def _patch(self, owner: Any, name: str, replacement: Any) -> None:
        original = owner.__dict__[name] if name in owner.__dict__ else getattr(owner, name)
        setattr(owner, name, replacement)
        self._undo.append(lambda: setattr(owner, name, original))

    # -- losses ---------------------------------------------------------------------
    def _wrap_backward(self, original: Callable[..., Any]) -> Callable[..., Any]:
        telemetry = self

        @wraps(original)
        def backward(*args: Any, **kwargs: Any) -> Any:
            telemetry._backward_depth += 1
            try:
                result = original(*args, **kwargs)
            finally:
                telemetry._backward_depth -= 1
            if telemetry._backward_depth == 0:
                telemetry._record_backward(args[0] if args else kwargs.get("tensors"))
            return result

        return backward

    def _record_backward(self, tensors: Any) -> None:
        loss = tensors[0] if isinstance(tensors, (tuple, list)) and len(tensors) == 1 else tensors
        value = _value(loss) if isinstance(loss, torch.Tensor) and loss.numel() == 1 else None
        self.writer.record("backward", i=self.backward_calls, loss=value, step=self.steps)
        self.backward_calls += 1

    def _wrap_loss(self, original: Callable[..., Any]) -> Callable[..., Any]:
        telemetry = self

        @wraps(original)
        def loss_fn(*args: Any, **kwargs: Any) -> Any:
            telemetry._loss_depth += 1
            try:
                result = original(*args, **kwargs)
            finally:
                telemetry._loss_depth -= 1
            if (
                telemetry._loss_depth == 0
                and isinstance(result, torch.Tensor)
                and result.requires_grad
                and result.numel() == 1
            ):
                telemetry._record_loss_fn(result)
            return result

        return loss_fn

    def _record_loss_fn(self, loss: torch.Tensor) -> None:
        """Every training loss while no ``backward()`` has run (then it is the only loss
        curve) and the first ``LOSS_FN_HEAD``; after that every ``sample_every``-th, since
        the backward records carry the curve and a record per call costs step time."""
        calls = self.loss_fn_calls
        if self.backward_calls == 0 or calls < LOSS_FN_HEAD or calls % self.sample_every == 0:
            self.writer.record("loss_fn", i=calls, loss=_value(loss))
        self.loss_fn_calls = calls + 1

    # -- optimizer steps ------------------------------------------------------------
    def _parameters(self, optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
        return [p for group in optimizer.param_groups for p in group["params"]]

    def _before_optimizer_step(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any):
        if self.steps % self.sample_every:  # samples steps 1, k+1, 2k+1, ...
            return
        with torch.no_grad():
            params = [p.detach() for p in self._parameters(optimizer)]
            grads = [p.grad for p in self._parameters(optimizer) if p.grad is not None]
            try:
                # One fused norm call for gradients and weights; the weights are copied
                # into buffers kept per optimizer, so sampling allocates nothing.
                norms = torch.stack(torch._foreach_norm(grads + params))
                self._grad_norm = torch.linalg.vector_norm(norms[: len(grads)])
                self._weight_norm = torch.linalg.vector_norm(norms[len(grads) :])
                before = self._copies.get(id(optimizer))
                if before is None or len(before) != len(params):
                    before = [torch.empty_like(p) for p in params]
                    self._copies[id(optimizer)] = before
                torch._foreach_copy_(before, params)
                self._before_step = before
            except RuntimeError:  # mixed devices or dtypes, sparse gradients: no sample
                self._grad_norm, self._before_step = None, None

    def _after_optimizer_step(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any):
        self.steps += 1
        now = time.perf_counter()
        step_time = None if self._last_step_time is None else now - self._last_step_time
        self._last_step_time = now
        ratio = None
        if self._before_step is not None:
            with torch.no_grad():
                params = [p.detach() for p in self._parameters(optimizer)]
                try:
                    torch._foreach_sub_(self._before_step, params)  # now holds -update
                    update = torch.linalg.vector_norm(
                        torch.stack(torch._foreach_norm(self._before_step))
                    )
                    ratio = _value(update / self._weight_norm.clamp_min(1e-30))
                except RuntimeError:
                    ratio = None
        grad_norm = None if self._grad_norm is None else _value(self._grad_norm)
        cuda_mb = None
        if torch.cuda.is_initialized():
            cuda_mb = torch.cuda.max_memory_allocated() / 2**20
            self.peak_cuda_mb = cuda_mb
        sampled = (self.steps - 1) % self.sample_every == 0
        self.writer.record(
            "step",
            i=self.steps,
            grad_norm=grad_norm,
            update_ratio=ratio,
            rss_mb=self.rss_mb() if sampled else None,  # memory moves slowly: sampled too
            cuda_mb=cuda_mb,
            step_time=step_time,
        )
        self._grad_norm, self._before_step = None, None
        self._settle_forwards()

    # -- forwards -------------------------------------------------------------------
    def _wrap_call(self, original: Callable[..., Any]) -> Callable[..., Any]:
        telemetry = self

        @wraps(original)
        def call(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            if telemetry._forward_depth:  # nested in a forward: pass straight through
                return original(module, *args, **kwargs)
            telemetry._forward_depth = 1
            try:
                output = original(module, *args, **kwargs)
            finally:
                telemetry._forward_depth = 0
            if not isinstance(module, loss_modules._Loss):
                telemetry._top_level_forward(module, output)
            return output

        return call

    def _top_level_forward(self, module: torch.nn.Module, output: Any) -> None:
        tensor = _first_tensor(output)
        if tensor is None:
            return
        grad_fn = tensor.grad_fn
        if grad_fn is not None:
            pending = _Forward(self, module.training)
            self._pending_forwards.append(pending)
            # A prehook on the output's autograd node (cheaper than Tensor.register_hook)
            # runs when a gradient flows into the output.
            grad_fn.register_prehook(pending)
        else:
            self.eval_forwards += 1

    def _settle_forwards(self) -> None:
        """Forwards that built a graph but got no gradient before this point were evals."""
        for pending in self._pending_forwards:
            if not pending.got_grad:
                self.eval_forwards += 1
                self.eval_forwards_grad += 1
        self._pending_forwards = []

    def counters(self) -> dict[str, int]:
        return {
            "steps": self.steps,
            "backward_calls": self.backward_calls,
            "loss_fn_calls": self.loss_fn_calls,
            "train_forwards": self.train_forwards,
            "train_forwards_eval_mode": self.train_forwards_eval_mode,
            "eval_forwards": self.eval_forwards,
            "eval_forwards_grad": self.eval_forwards_grad,
        }

    def _append_forward_counters(self) -> None:
        """Runs before every flush: the forward counters, when they moved."""
        counters = (
            self.train_forwards,
            self.train_forwards_eval_mode,
            self.eval_forwards,
            self.eval_forwards_grad,
        )
        if counters != self._forwards_written:
            self._forwards_written = counters
            self.writer.append(
                "forwards",
                train_forwards=counters[0],
                train_forwards_eval_mode=counters[1],
                eval_forwards=counters[2],
                eval_forwards_grad=counters[3],
            )

    def finish(self) -> dict[str, int]:
        self._settle_forwards()
        self.writer.flush()
        return self.counters()

    def rss_mb(self) -> float | None:
        if self._statm < 0:
            return None
        fields = os.pread(self._statm, 128, 0).split()
        return round(int(fields[1]) * PAGE_MB, 2)


def _value(tensor: torch.Tensor) -> float | torch.Tensor:
    """A CPU scalar now; an accelerator's scalar later, in the writer's batched read."""
    if tensor.is_cpu:
        return tensor.item()
    return tensor.detach().reshape(())


def _global_norm(tensors: list[torch.Tensor]) -> torch.Tensor:
    norms = torch._foreach_norm(tensors)
    if len(norms) == 1:
        return norms[0].float()
    try:
        return torch.linalg.vector_norm(torch.stack(norms)).float()
    except RuntimeError:  # mixed dtypes
        return torch.linalg.vector_norm(torch.stack([n.float() for n in norms]))
