"""Drive a flat ``main()`` one optimizer step at a time, for loops with no step function.

``regression_diabetes`` trains inline in ``main()``: there is no function a test can call
for one step. ``SteppedMain`` runs ``main(argv)`` in a thread and pauses it through global
hooks: first at the model's first training forward (so a test sees the fresh model), then
after every ``optimizer.step()``. ``step()`` lets it run to the next pause and returns the
loss that step computed (the output of the loop's loss module). The loop's own code does
every step; a test decides only when. Mutants that crash ``main()`` raise in ``step()``.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.nn.modules import module as module_hooks
from torch.optim import optimizer as optimizer_hooks

TIMEOUT_S = 60.0


class _Stop(BaseException):
    """Ends the paused ``main()`` thread when the test is done with it."""


class SteppedMain:
    def __init__(self, main: Callable[[list[str]], Any], argv: list[str]):
        self.model: nn.Module | None = None
        self.losses: list[float] = []
        self._events: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._orders: queue.Queue[str] = queue.Queue()
        self._depth = 0
        self._thread = threading.Thread(target=self._run, args=(main, argv), daemon=True)
        self._handles = [
            module_hooks.register_module_forward_pre_hook(self._before_forward),
            module_hooks.register_module_forward_hook(self._after_forward),
            optimizer_hooks.register_optimizer_step_post_hook(self._after_step),
        ]

    def __enter__(self) -> SteppedMain:
        self._thread.start()
        self._expect("model")
        return self

    def __exit__(self, *_exc: Any) -> None:
        if self._thread.is_alive():
            self._orders.put("stop")
            self._thread.join(TIMEOUT_S)
        for handle in self._handles:
            handle.remove()

    def step(self) -> float:
        """Let ``main()`` run one more optimizer step; the loss of that step."""
        self._orders.put("go")
        self._expect("stepped")
        return self.losses[-1]

    def _expect(self, kind: str) -> None:
        event, payload = self._events.get(timeout=TIMEOUT_S)
        if event == "error":
            raise payload
        if event != kind:
            raise AssertionError(f"main() {event} where the test waited for {kind!r}")

    def _run(self, main: Callable[[list[str]], Any], argv: list[str]) -> None:
        try:
            main(argv)
        except _Stop:
            return
        except Exception as exc:  # the mutant's crash is the test's failure
            self._events.put(("error", exc))
            return
        self._events.put(("finished", None))

    def _pause(self, event: str) -> None:
        self._events.put((event, None))
        if self._orders.get(timeout=TIMEOUT_S) == "stop":
            raise _Stop

    def _mine(self) -> bool:
        return threading.current_thread() is self._thread

    def _before_forward(self, module: nn.Module, _args: Any) -> None:
        if not self._mine():
            return
        self._depth += 1
        is_model = not isinstance(module, nn.modules.loss._Loss)
        if self._depth == 1 and is_model and torch.is_grad_enabled() and self.model is None:
            self.model = module
            self._pause("model")

    def _after_forward(self, module: nn.Module, _args: Any, out: Any) -> None:
        if not self._mine():
            return
        self._depth -= 1
        if self._depth == 0 and isinstance(module, nn.modules.loss._Loss) and out.requires_grad:
            self.losses.append(float(out.detach()))

    def _after_step(self, _optimizer: Any, _args: Any, _kwargs: Any) -> None:
        if self._mine():
            self._pause("stepped")
