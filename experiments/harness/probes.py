"""Witness probes: the runtime facts that show a mutant's run is the bug it claims.

Each operator declares its witness (``mutator.witness``): a fact from ``FACTS`` and how the
mutant's must differ from the reference run's on the same seed (``experiments.witness``
decides). The facts come from the telemetry's own hooks (``hooks.py``: backward, the
optimizer step hooks, the loss functions; ``forwards.py``: top-level forwards, told into
training and evaluation) and from a few call wrappers (``probe_calls.py``: dropout,
gradient clipping, ``GradScaler``, ``load_state_dict``). Each hook does a few attribute
reads; what costs more (a digest, a parameter census) runs on the first events and every
``EVERY``-th (digest.py) or once per optimizer. Events keep their count and the optimizer
step of the first, so a crash's partial record still says what fired before it.

``facts()`` is the JSON the end record holds (``witness``); the telemetry appends it to
the trace as a ``witness`` record when it changed (at a first event, and on sampled
steps), so a run killed without an end record keeps what fired and when.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch

from experiments.harness.digest import EVERY, HEAD, Sampled, digest, resolve
from experiments.harness.modes import ModeModules, modes
from experiments.harness.probe_graphs import Death, any_alive, sentinels
from experiments.harness.probe_params import Updates, leaves, tied_units
from experiments.harness.probes_mechanism import Networks, gradients, second_input

EVENTS = (
    "stale_grad",
    "train_mode_off",
    "eval_mode_on",
    "eval_graph",
    "backward_no_graph",
    "empty_steps",
    "graph_kept",
    "retained_graph",
    "clip_before_backward",
    "self_loads",
    "stale_forward",
    "ce_on_probabilities",
    "nonscalar_backward",
)
SEQUENCES = (
    "targets",
    "train_inputs",
    "eval_inputs",
    "losses",
    "eval_outputs",
    "second_inputs",
)
MAX_OPTIMIZERS = 8  # first-step settings kept per run
MAX_MODULES = 4  # top-level modules of training forwards kept for the parameter census
MAX_LR_CHANGES = 64
_GROUP_KEYS = ("lr", "weight_decay", "eps", "momentum")
_Tensor = torch.Tensor


class Probes:
    def __init__(self) -> None:
        self.events: dict[str, list[Any]] = {name: [0, None] for name in EVENTS}
        self.sequences = {name: Sampled() for name in SEQUENCES}
        self.steps = 0
        self.dropouts = 0  # dropout calls that dropped (probe_calls.py)
        self.dropout_p: set[float] = set()
        self.backward_since_step = False
        self.counts = dict.fromkeys(
            (
                "clip_active",
                "clip_calls",
                "scaler_scale",
                "scaler_unscale",
                "module_loads",
                "optimizer_loads",
                "clamp_above",
                "clamp_below",
                "shuffled_loaders",
            ),
            0,
        )
        self.clip_max: float | None = None
        self.clip_cut_at: float | None = None  # the threshold of the first clip that cut
        # Accelerator clip checks (cut, threshold), read at the end.
        self.clip_pending: list[tuple[_Tensor, float]] = []
        self.first_batch: int | None = None
        self.train_samples = 0
        self.first_loss: dict[str, Any] | None = None
        self.mode_modules = 0
        self.optimizers: list[dict[str, Any]] = []
        self.optimizer_count = 0
        self.foreign_grads = 0
        self.no_grad_params: int | None = None
        self.zero_params: int | None = None
        self.tied_units: int | None = None
        self.updates = Updates()  # hand-written updates (probe_params.py)
        self.lr: list[list[float]] = []
        self.dirty = self.fresh = False
        self._modes = ModeModules()
        self._seen: dict[int, Any] = {}  # id(optimizer) -> weakref
        self._modules: dict[int, Any] = {}  # id -> weakref: training forwards' modules
        # (param, grad, its version, zero_grad calls) after the last backward, per watched
        # parameter (one of a module; a few leaves when no module holds any).
        self._stale: list[tuple[Any, Any, int, int]] = []
        self._stale_pre: list[bool] = []
        self.zero_grads = 0  # zero_grad() calls (probe_calls.py)
        self.backwards = 0
        self._last_graph: tuple[Any, ...] = ()
        self._retained: tuple[Any, ...] = ()
        self._retained_death: Death | None = None
        self._empty_step = -1
        self._last_lr: float | None = None
        self.networks = Networks()  # which network each top-level forward ran
        self.trained_per_step = 0  # the most forwards trained between two steps
        self._trained_now = 0

    def cut_at(self, limit: Any) -> None:
        """A clip cut the gradient at ``limit`` (probe_calls.py): the first one is kept."""
        if self.clip_cut_at is None and isinstance(limit, (int, float)):
            self.clip_cut_at = float(limit)
            self.dirty = True

    def event(self, name: str) -> None:
        record = self.events[name]
        if not record[0]:
            record[1] = self.steps
            self.fresh = True
        record[0] += 1
        self.dirty = True

    # -- forwards (forwards.py) ------------------------------------------------------
    def enter_forward(self) -> int:
        if self._retained:
            if any_alive(self._retained) and self._retained_death is not None:
                self._retained_death.seen()
            self._retained = ()
        return self.dropouts

    def forward_info(self, module: Any, args: tuple, output: Any, mark: int) -> tuple:
        """What a top-level forward showed, filed as training or evaluation later (one
        with a graph is most likely training: its inputs are digested when the training
        sequence wants its next one)."""
        found = self._modes.of(module)
        off, on = modes(found) if found else (False, False)
        self.networks.see(module)
        first = args[0] if args else None
        batch = int(first.shape[0]) if isinstance(first, _Tensor) and first.dim() else None
        # An evaluation (a forward without a graph) is digested, inputs and outputs, every
        # time: its sequences' checksums cover them all (a test set evaluated once at the
        # end). A forward with a graph, most likely training, only its inputs, and only
        # where the training sequence samples one (a digest costs ~10 us in a real step).
        if output.grad_fn is None:
            inputs, outputs = digest(first), digest(output)
            second = False
        else:
            inputs = digest(first) if self.sequences["train_inputs"].want() else None
            outputs = None
            second = second_input(args, self.sequences["second_inputs"])
        on = on or self.dropouts != mark
        return (module, off, on, len(found), batch, inputs, outputs, self.steps, second)

    def train_forward(self, info: tuple) -> None:
        module, off, _on, count, batch, inputs, _outputs, made_at, second = info
        if off:
            self.event("train_mode_off")
        if made_at < self.steps:  # made before an optimizer step, backwarded after it
            self.event("stale_forward")
        self._trained_now += 1
        if second is not False:  # a forward with a second tensor argument
            self.sequences["second_inputs"].add(second)
        self.mode_modules = max(self.mode_modules, count)
        if batch is not None:
            if self.first_batch is None:
                self.first_batch = batch
                self.dirty = True
            self.train_samples += batch
        self.sequences["train_inputs"].add(inputs)
        known = self._modules.get(id(module))
        new = known is None or known() is not module  # a new module (or one reusing an id)
        if new and (known is not None or len(self._modules) < MAX_MODULES):
            self._modules[id(module)] = weakref.ref(module)

    def eval_forward(self, info: tuple, graph: bool) -> None:
        _module, _off, on, _count, _batch, inputs, outputs, _made_at, _second = info
        if on:
            self.event("eval_mode_on")
        if graph:
            self.event("eval_graph")
        self.sequences["eval_inputs"].add(inputs)
        self.sequences["eval_outputs"].add(outputs)

    # -- losses (hooks.py's loss-function wrapper) -------------------------------------
    def loss_call(self, name: str, args: tuple, kwargs: dict[str, Any]) -> None:
        """A loss function about to run with autograd on (before it may raise)."""
        first = args[0] if args else kwargs.get("input")
        target = args[1] if len(args) > 1 else kwargs.get("target")
        if not (
            (isinstance(first, _Tensor) and first.requires_grad)
            or (isinstance(target, _Tensor) and target.requires_grad)
        ):
            return
        if self.first_loss is None:
            inputs = [value for value in (*args, *kwargs.values()) if isinstance(value, _Tensor)]
            self.first_loss = {
                "name": name,
                "options": {
                    key: value
                    for key, value in kwargs.items()
                    if isinstance(value, (int, float, str, bool)) or value is None
                },
                "tensors": [
                    [str(value.dtype), list(value.shape), value.requires_grad] for value in inputs
                ],
            }
            self.dirty = True
        targets = self.sequences["targets"]
        targets.add(digest(target) if targets.want() else None)

    def eval_loss(self, result: _Tensor) -> None:
        self.sequences["eval_outputs"].add(digest(result))

    # -- backward (hooks.py) ---------------------------------------------------------
    def before_backward(self, tensors: Any) -> None:
        loss = tensors[0] if isinstance(tensors, (tuple, list)) and tensors else tensors
        if isinstance(loss, _Tensor) and not loss.requires_grad:
            self.event("backward_no_graph")
        if isinstance(loss, _Tensor) and loss.numel() != 1:  # an unreduced loss
            self.event("nonscalar_backward")
        if any_alive(self._last_graph):
            self.event("graph_kept")
        self._stale_pre = [self._uncleared(stale) for stale in self._stale]
        self.updates.check(optimizer_stepped=self.optimizer_count > 0)

    def _uncleared(self, stale: tuple[Any, Any, int, int]) -> bool:
        """Whether a sampled parameter's gradient is still the one the last backward left:
        the same tensor, and no ``zero_grad()`` since. Changed in place without one (a clip
        rescales it; a hand-written loop calls ``grad.zero_()``): uncleared unless zero."""
        param, grad, version, zeroed = stale
        if param.grad is not grad or self.zero_grads != zeroed:
            return False
        return grad._version == version or bool(grad.detach().any())

    def after_backward(self, tensors: Any, retain: bool) -> None:
        loss = tensors[0] if isinstance(tensors, (tuple, list)) and tensors else tensors
        self.backward_since_step = True
        if self._stale:
            kept, fired = [], False
            for (param, old, version, _), pre in zip(self._stale, self._stale_pre):
                grad = param.grad
                fired = fired or (pre and grad is old and grad._version != version)
                if grad is not None:
                    kept.append((param, grad, grad._version, self.zero_grads))
            if fired:
                self.event("stale_grad")
            self._stale = kept
        else:
            self._stale = [
                (param, param.grad, param.grad._version, self.zero_grads)
                for param in self._sample_params(loss)
            ]
        # The graph's lifetime is checked on sampled backwards (a sentinel costs ~4 us),
        # and so are hand-written updates while no optimizer has stepped.
        count = self.backwards
        self.backwards = count + 1
        sampled = count < HEAD or count % EVERY == 0
        self._last_graph = sentinels(loss) if sampled else ()
        if retain:
            self._retained = self._last_graph
            self._retained_death = (
                Death(lambda: self.event("retained_graph"), self._last_graph)
                if self._last_graph
                else None
            )
        if sampled and not self.optimizer_count:
            self.updates.watch(stale[0] for stale in self._stale)

    def _sample_params(self, loss: Any) -> list[Any]:
        """The first parameter with a gradient of the latest trained module, else a few
        leaves of the loss's graph (tensors no module holds): whether a later backward adds
        into their gradients uncleared is the stale-gradient probe."""
        for ref in reversed(list(self._modules.values())):
            module = ref()
            for param in module.parameters() if module is not None else ():
                if param.grad is not None:
                    return [param]
        return leaves(loss)

    # -- optimizer steps (hooks.py) --------------------------------------------------
    def before_step(self, optimizer: torch.optim.Optimizer) -> None:
        groups = optimizer.param_groups
        if not any(p.grad is not None for group in groups for p in group["params"]):
            self._empty(self.steps + 1)
        seen = self._seen.get(id(optimizer))
        if seen is None or seen() is not optimizer:
            self._first_step(optimizer)

    def _empty(self, step: int) -> None:
        if self._empty_step != step:
            self._empty_step = step
            self.event("empty_steps")

    def zero_grad_norm(self, step: int) -> None:
        """A sampled step whose gradients were all zero (zero_grad without set_to_none)."""
        self._empty(step)

    def _first_step(self, optimizer: torch.optim.Optimizer) -> None:
        self._seen[id(optimizer)] = weakref.ref(optimizer)
        self.optimizer_count += 1
        self.dirty = self.fresh = True
        params = [p for group in optimizer.param_groups for p in group["params"]]
        held = {id(p) for p in params}
        modules = [ref() for ref in self._modules.values()]
        trained = [p for m in modules if m is not None for p in m.parameters()]
        self.foreign_grads += sum(1 for p in trained if p.grad is not None and id(p) not in held)
        with torch.no_grad():
            if self.no_grad_params is None:
                self.no_grad_params = sum(1 for p in trained if p.requires_grad and p.grad is None)
                self.zero_params = sum(1 for p in params if p.numel() and not bool(p.any()))
        if len(self.optimizers) < MAX_OPTIMIZERS:
            group = optimizer.param_groups[0] if optimizer.param_groups else {}
            self.optimizers.append(
                {
                    "class": type(optimizer).__name__,
                    **{key: _plain(group.get(key)) for key in _GROUP_KEYS},
                    "state": len(optimizer.state),
                    "grad": gradients(params),
                }
            )

    def after_step(self, optimizer: torch.optim.Optimizer, steps: int) -> None:
        self.steps = steps
        self.backward_since_step = False
        if self._trained_now > self.trained_per_step:
            self.trained_per_step = self._trained_now
            self.dirty = True
        self._trained_now = 0
        groups = optimizer.param_groups
        if self.tied_units is None and steps >= 2:  # once, after two updates
            modules = [ref() for ref in self._modules.values()]
            own = [p for m in modules if m is not None for p in m.parameters()]
            held = [p for group in groups for p in group["params"]]
            self.tied_units = tied_units({id(p): p for p in (*own, *held)}.values())
            self.dirty = True
        lr = groups[0].get("lr") if groups else None
        if lr != self._last_lr and len(self.lr) < MAX_LR_CHANGES:
            self._last_lr = lr
            self.lr.append([steps, _plain(lr)])

    # -- the record ------------------------------------------------------------------
    def facts(self) -> dict[str, Any]:
        active, cut_at = self.counts["clip_active"], self.clip_cut_at
        for pending, limit in list(self.clip_pending):
            cut = int(resolve(pending) or 0)
            active += cut
            if cut and cut_at is None:
                cut_at = limit
        return {
            **{name: list(record) for name, record in self.events.items()},
            **{name: sequence.record() for name, sequence in self.sequences.items()},
            **{name: count for name, count in self.counts.items() if name != "clip_active"},
            "clip_active": active,
            "clip_max": self.clip_max,
            "clip_cut_at": cut_at,
            "foreign_grads": self.foreign_grads,
            "no_grad_params": self.no_grad_params,
            "zero_params": self.zero_params,
            "tied_units": self.tied_units,
            "manual_updates": self.updates.count,
            "manual_lr": self.updates.lr,
            "train_samples": self.train_samples,
            "first_batch": self.first_batch,
            "optimizers": self.optimizer_count,
            "optimizer": [
                {key: resolve(value) for key, value in settings.items()}
                for settings in self.optimizers
            ],
            "optimizer_state": sum(settings["state"] for settings in self.optimizers),
            "lr": [list(change) for change in self.lr],
            "dropout_p": sorted(self.dropout_p),
            "loss_call": self.first_loss,
            "mode_modules": self.mode_modules,
            "dropout_calls": self.dropouts,
            "forwards": self.networks.forwards,
            "forward_order": list(self.networks.order),
            "trained_per_step": max(self.trained_per_step, self._trained_now),
        }


def _plain(value: Any) -> Any:
    """A param-group setting as JSON holds it (a tensor lr as a float, betas as a list)."""
    if isinstance(value, _Tensor):
        return resolve(value)
    if isinstance(value, (tuple, list)):
        return [_plain(item) for item in value]
    return value if isinstance(value, (int, float, str, bool)) or value is None else str(value)
