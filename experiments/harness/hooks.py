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
  nested in another module's forward); ``forwards.py`` tells training forwards (their
  output receives a gradient) from eval forwards. (A wrapper of ``__call__`` rather than
  global forward hooks: any global module hook sends every module call down torch's slow
  hook path, which cost more than the rest of the telemetry.) ``torch.autograd.grad`` is
  wrapped for the same reason.
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
from torch.optim import optimizer as optimizer_hooks

from experiments.harness import probe_calls
from experiments.harness.forwards import Forwards
from experiments.harness.probes import Probes
from experiments.harness.writer import Layout, TraceWriter

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
# The per-step records, written through the writer's template path (see writer.py).
BACKWARD = Layout("backward", "i", "loss", "step")
LOSS_FN = Layout("loss_fn", "i", "loss")
STEP = Layout("step", "i", "grad_norm", "update_ratio", "rss_mb", "cuda_mb", "step_time")
_Tensor = torch.Tensor
_cuda_initialized = torch.cuda.is_initialized
_grad_enabled = torch.is_grad_enabled


class Telemetry:
    def __init__(
        self, writer: TraceWriter, sample_every: int = SAMPLE_EVERY, witness: bool = True
    ) -> None:
        self.writer = writer
        self.sample_every = max(1, int(sample_every))
        self.backward_calls = 0
        self.loss_fn_calls = 0
        self.steps = 0
        self.forwards = Forwards()
        # The witness facts (probes.py); None only to time the telemetry without them.
        self.probes: Probes | None = Probes() if witness else None
        self.forwards.probes = self.probes
        self.peak_cuda_mb: float | None = None
        self._backward_depth = 0
        self._loss_depth = 0
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
        self._patch(torch.autograd, "grad", self._wrap_grad(torch.autograd.grad))
        self._patch(torch.nn.Module, "__call__", self.forwards.wrap_call(torch.nn.Module.__call__))
        if self.probes is not None:
            probe_calls.install(self.probes, self._patch)
        handles = [
            optimizer_hooks.register_optimizer_step_pre_hook(self._before_optimizer_step),
            optimizer_hooks.register_optimizer_step_post_hook(self._after_optimizer_step),
        ]
        self._undo.extend(handle.remove for handle in handles)
        self.writer.before_flush = self._append_forward_counters

    def remove(self) -> None:
        """Undo ``install`` (for in-process benchmarks and a reused run process)."""
        while self._undo:
            self._undo.pop()()

    def close(self) -> None:
        """Remove the hooks and close the ``statm`` descriptor (a reused run process)."""
        self.remove()
        if self._statm >= 0:
            os.close(self._statm)
            self._statm = -1

    def _patch(self, owner: Any, name: str, replacement: Any) -> None:
        own = name in owner.__dict__
        original = owner.__dict__[name] if own else getattr(owner, name)
        setattr(owner, name, replacement)
        if own:
            self._undo.append(lambda: setattr(owner, name, original))
        else:  # inherited (a tensor method): deleted, not shadowed (a reused process checks)
            self._undo.append(lambda: delattr(owner, name))

    # -- losses ---------------------------------------------------------------------
    def _wrap_backward(self, original: Callable[..., Any]) -> Callable[..., Any]:
        telemetry, forwards, probes = self, self.forwards, self.probes

        @wraps(original)
        def backward(*args: Any, **kwargs: Any) -> Any:
            tensors = args[0] if args else kwargs.get("tensors")
            if forwards._pending or forwards._late:  # waiting forwards this backward reaches
                inputs = args[5] if len(args) > 5 else kwargs.get("inputs")
                forwards.claim(tensors, exact_walk=inputs is None)
            if telemetry._backward_depth:  # nested in a backward: counted by the outer one
                return original(*args, **kwargs)
            if probes is not None:
                probes.before_backward(tensors)
            telemetry._backward_depth = 1
            forwards.in_backward += 1
            try:
                result = original(*args, **kwargs)
            finally:
                telemetry._backward_depth = 0
                forwards.in_backward -= 1
            retain = args[2] if len(args) > 2 else kwargs.get("retain_graph")
            if retain is None:  # create_graph=True retains the graph too
                retain = args[3] if len(args) > 3 else kwargs.get("create_graph", False)
            if probes is not None:
                probes.after_backward(tensors, bool(retain))
            telemetry._record_backward(tensors)
            return result

        return backward

    def _wrap_grad(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """``torch.autograd.grad`` runs only the paths to its inputs: the waiting forwards
        its walk reaches get the prehook instead of being counted (forwards.py)."""
        forwards = self.forwards

        @wraps(original)
        def grad(*args: Any, **kwargs: Any) -> Any:
            if forwards._pending or forwards._late:
                forwards.claim(args[0] if args else kwargs.get("outputs"), exact_walk=False)
            forwards.in_backward += 1
            try:
                return original(*args, **kwargs)
            finally:
                forwards.in_backward -= 1

        return grad

    def _record_backward(self, tensors: Any) -> None:
        loss = tensors[0] if isinstance(tensors, (tuple, list)) and len(tensors) == 1 else tensors
        value = self._value(loss) if isinstance(loss, _Tensor) and loss.numel() == 1 else None
        calls = self.backward_calls
        self.backward_calls = calls + 1
        self.writer.add(BACKWARD, calls, value, self.steps)
        if self.probes is not None:
            self.probes.sequences["losses"].add(value)

    def _wrap_loss(self, original: Callable[..., Any]) -> Callable[..., Any]:
        telemetry, probes, name = self, self.probes, original.__name__

        @wraps(original)
        def loss_fn(*args: Any, **kwargs: Any) -> Any:
            if telemetry._loss_depth:  # e.g. cross_entropy calling nll_loss: counted once
                return original(*args, **kwargs)
            grad_on = _grad_enabled()
            if grad_on and probes is not None:  # before the call: one that raises was called
                probes.loss_call(name, args, kwargs)
            telemetry._loss_depth = 1
            try:
                result = original(*args, **kwargs)
            finally:
                telemetry._loss_depth = 0
            if isinstance(result, _Tensor) and result.numel() == 1:
                if result.requires_grad:
                    telemetry._record_loss_fn(result)
                elif not grad_on and probes is not None:
                    probes.eval_loss(result)
            return result

        return loss_fn

    def _record_loss_fn(self, loss: torch.Tensor) -> None:
        """Every training loss while no ``backward()`` has run (then it is the only loss
        curve) and the first ``LOSS_FN_HEAD``; after that every ``sample_every``-th, since
        the backward records carry the curve and a record per call costs step time."""
        calls = self.loss_fn_calls
        self.loss_fn_calls = calls + 1
        if self.backward_calls == 0 or calls < LOSS_FN_HEAD or calls % self.sample_every == 0:
            self.writer.add(LOSS_FN, calls, self._value(loss))

    # -- optimizer steps ------------------------------------------------------------
    def _parameters(self, optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
        return [p for group in optimizer.param_groups for p in group["params"]]

    def _before_optimizer_step(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any):
        if self.probes is not None:
            self.probes.before_step(optimizer)
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
        steps = self.steps = self.steps + 1
        now = time.perf_counter()
        last, self._last_step_time = self._last_step_time, now
        step_time = None if last is None else now - last
        if (steps - 1) % self.sample_every or (
            self._grad_norm is None and self._before_step is None
        ):
            # Not a sampled step (or nothing could be sampled): the step's own record only.
            cuda_mb = self._cuda_mb() if _cuda_initialized() else None
            rss_mb = None if (steps - 1) % self.sample_every else self.rss_mb()
            self.writer.add(STEP, steps, None, None, rss_mb, cuda_mb, step_time)
        else:
            self._sampled_step(optimizer, steps, step_time)
        self.forwards.settle()
        probes = self.probes
        if probes is None:
            return
        probes.after_step(optimizer, steps)
        if probes.dirty and (probes.fresh or (steps - 1) % self.sample_every == 0):
            # What fired so far, for a run killed before its end record.
            self.writer.append("witness", **self.witness_facts())

    def _cuda_mb(self) -> float:
        cuda_mb = torch.cuda.max_memory_allocated() / 2**20
        self.peak_cuda_mb = cuda_mb
        return cuda_mb

    def _sampled_step(self, optimizer: torch.optim.Optimizer, steps: int, step_time: Any):
        """The step record with gradient norm, update ratio and RSS (see the pre-hook)."""
        ratio = None
        if self._before_step is not None:
            with torch.no_grad():
                params = [p.detach() for p in self._parameters(optimizer)]
                try:
                    torch._foreach_sub_(self._before_step, params)  # now holds -update
                    update = torch.linalg.vector_norm(
                        torch.stack(torch._foreach_norm(self._before_step))
                    )
                    ratio = self._value(update / self._weight_norm.clamp_min(1e-30))
                except RuntimeError:
                    ratio = None
        grad_norm = None if self._grad_norm is None else self._value(self._grad_norm)
        # zero_grad(set_to_none=False) left only zeros to step on
        if grad_norm.__class__ is float and grad_norm == 0.0 and self.probes is not None:
            self.probes.zero_grad_norm(steps)
        cuda_mb = self._cuda_mb() if _cuda_initialized() else None
        # Memory moves slowly: read with the norms only.
        self.writer.add(STEP, steps, grad_norm, ratio, self.rss_mb(), cuda_mb, step_time)
        self._grad_norm, self._before_step = None, None

    def counters(self) -> dict[str, int]:
        return {
            "steps": self.steps,
            "backward_calls": self.backward_calls,
            "loss_fn_calls": self.loss_fn_calls,
            "train_forwards": self.forwards.train_forwards,
            "train_forwards_eval_mode": self.forwards.train_forwards_eval_mode,
            "eval_forwards": self.forwards.eval_forwards,
            "eval_forwards_grad": self.forwards.eval_forwards_grad,
        }

    def witness_facts(self) -> dict[str, Any] | None:
        """The witness probes' facts with the counters they compare (probes.py)."""
        if self.probes is None:
            return None
        self.probes.dirty = self.probes.fresh = False
        return {
            **self.probes.facts(),
            "steps": self.steps,
            "backward_calls": self.backward_calls,
        }

    def _append_forward_counters(self) -> None:
        """Runs before every flush: the forward counters, when they moved."""
        counters = self.forwards.counters()
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
        self.forwards.settle()
        self.writer.flush()
        return self.counters()

    def _value(self, tensor: torch.Tensor) -> float | torch.Tensor:
        """A CPU scalar now; an accelerator's scalar later, in the writer's batched read."""
        if tensor.is_cpu:
            return tensor.item()
        self.writer.has_tensors = True
        return tensor.detach().reshape(())

    def rss_mb(self) -> float | None:
        if self._statm < 0:
            return None
        fields = os.pread(self._statm, 128, 0).split()
        return round(int(fields[1]) * PAGE_MB, 2)
