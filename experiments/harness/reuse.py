"""In a reused run process: put back what a run changed, and tell whether it all came back.

A forked run process may run several runs in sequence (``Runner(reuse=K)``): forking the
~440 MB warm parent and tearing the copy down cost ~30-50 ms of kernel time per run,
more than a small loop's telemetry. Before its first run the process takes a ``Snapshot``
of what a run can change; after each run ``Snapshot.restore`` puts it back and
``Snapshot.check`` compares a fingerprint with the one taken at the start. The process
serves another run only when the run ended ``ok`` and ``check`` found nothing; otherwise it
exits as a one-run process does, and the next run gets a fresh fork.

Put back: ``sys.modules`` (modules the run imported from outside the installed libraries,
so project modules and a mutant are imported afresh; replaced entries), ``sys.path``,
``sys.meta_path``, ``sys.path_hooks``, ``sys.argv``, the working directory,
``os.environ``, ``builtins``, warning filters, the root logger, signal handlers, the
recursion limit, the collector's settings and torch's global modes (default dtype, grad,
anomaly, deterministic algorithms, threads). Checked, and not put back (a difference
retires the process): monkeypatched attributes of torch, ``torch.nn.functional``,
``Module``, ``Tensor``, ``Optimizer``, numpy and the stdlib ``random`` and ``math``; global
module and optimizer hooks; cuDNN/MKLDNN flags, matmul precision, print options, numpy's
error state; threads, child processes, open descriptors, trace and profile functions;
resident memory above ``MEMORY_MARGIN_MB`` over what it was after the first run.

Not isolated (documented in DESIGN.md): state inside C extensions that nothing above
reads (e.g. a library's private C-level cache), attributes of library modules other than
those listed, and allocator caches (a reused process starts a run with the previous runs'
freed memory in its heap, so ``peak_rss_mb`` is measured from the run's start with
``/proc/self/clear_refs``, not from the fork).
"""

from __future__ import annotations

import builtins
import contextlib
import gc
import linecache
import logging
import math
import os
import random
import signal
import sys
import sysconfig
import threading
import time
import warnings
from typing import Any

import torch

MEMORY_MARGIN_MB = 48.0  # growth over the first run's resident memory that retires the process
_PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20
_LIBRARY_PATHS = tuple(
    {
        os.path.realpath(path)
        for name in ("stdlib", "platstdlib", "purelib", "platlib")
        if (path := sysconfig.get_paths().get(name))
    }
)


def _watched() -> list[Any]:
    """Namespaces whose attributes a script could monkeypatch for every later run."""
    namespaces: list[Any] = [
        torch,
        torch.nn,
        torch.nn.functional,
        torch.nn.Module,
        torch.Tensor,
        torch.optim,
        torch.optim.Optimizer,
        torch.autograd,
        random,
        math,
    ]
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        namespaces.append(numpy)
    return namespaces


def _attribute_ids(namespace: Any) -> dict[str, int]:
    return {name: id(value) for name, value in vars(namespace).items()}


def _global_hook_counts() -> tuple[int, ...]:
    from torch.nn.modules import module as module_hooks
    from torch.optim import optimizer as optimizer_hooks

    counts = [
        len(getattr(module_hooks, name))
        for name in dir(module_hooks)
        if name.startswith("_global_") and isinstance(getattr(module_hooks, name), dict)
    ]
    counts.append(len(optimizer_hooks._global_optimizer_pre_hooks))
    counts.append(len(optimizer_hooks._global_optimizer_post_hooks))
    return tuple(counts)


def torch_modes() -> dict[str, Any]:
    """Torch's process-wide settings a script can change."""
    backends = torch.backends
    return {
        "dtype": torch.get_default_dtype(),
        "device": str(torch.get_default_device()) if hasattr(torch, "get_default_device") else "",
        "grad": torch.is_grad_enabled(),
        "inference": torch.is_inference_mode_enabled(),
        "anomaly": (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()),
        "deterministic": (
            torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled(),
        ),
        "threads": torch.get_num_threads(),
        "interop": torch.get_num_interop_threads(),
        "matmul": torch.get_float32_matmul_precision(),
        "cudnn": (
            backends.cudnn.enabled,
            backends.cudnn.benchmark,
            backends.cudnn.deterministic,
            backends.cudnn.allow_tf32,
        ),
        "mkldnn": backends.mkldnn.enabled,
        "print": tuple(sorted(vars(torch._tensor_str.PRINT_OPTS).items())),
    }


def _set_torch_modes(modes: dict[str, Any]) -> None:
    torch.set_default_dtype(modes["dtype"])
    torch.set_grad_enabled(modes["grad"])
    torch.set_anomaly_enabled(*modes["anomaly"])
    enabled, warn_only = modes["deterministic"]
    torch.use_deterministic_algorithms(enabled, warn_only=warn_only)
    torch.set_num_threads(modes["threads"])


def _numpy_state() -> Any:
    numpy = sys.modules.get("numpy")
    if numpy is None:
        return None
    return (tuple(sorted(numpy.geterr().items())), repr(sorted(numpy.get_printoptions().items())))


def _signal_handlers() -> dict[int, Any]:
    handlers = {}
    for number in signal.valid_signals():
        with contextlib.suppress(OSError, ValueError):
            handlers[number] = signal.getsignal(number)
    return handlers


def open_descriptors() -> set[int]:
    """Open descriptors, without the one the listing itself used (closed by now)."""
    found = set()
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            os.readlink(f"/proc/self/fd/{name}")
            found.add(int(name))
    return found


def thread_count() -> int:
    return len(os.listdir("/proc/self/task"))


def resident_mb() -> float:
    with open("/proc/self/statm", "rb") as statm:
        return int(statm.read().split()[1]) * _PAGE_MB


def reset_peak_memory() -> bool:
    """Start the kernel's peak resident-set count (VmHWM, ``ru_maxrss``) from now."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
    except OSError:
        return False
    return True


def peak_memory_mb() -> float | None:
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 2)
    except (OSError, ValueError, IndexError):
        return None
    return None


def _is_library(module: Any) -> bool:
    path = getattr(module, "__file__", None)
    if not isinstance(path, str):
        return False
    real = os.path.realpath(path)
    return any(real.startswith(root + os.sep) for root in _LIBRARY_PATHS)


class Snapshot:
    """What a run can change, taken in the run process before its first run."""

    def __init__(self) -> None:
        self.modules = dict(sys.modules)
        self.path = list(sys.path)
        self.meta_path = list(sys.meta_path)
        self.path_hooks = list(sys.path_hooks)
        self.argv = list(sys.argv)
        self.lines = set(linecache.cache)
        self.cwd = os.getcwd()
        self.environ = dict(os.environ)
        self.builtins = dict(vars(builtins))
        self.filters = list(warnings.filters)
        root = logging.getLogger()
        self.logging = (list(root.handlers), root.level, logging.root.manager.disable)
        self.signals = _signal_handlers()
        self.recursion = sys.getrecursionlimit()
        self.gc = (gc.isenabled(), gc.get_threshold())
        self.modes = torch_modes()
        self.fingerprint = self._fingerprint()
        self.memory_after_first: float | None = None

    def _fingerprint(self) -> dict[str, Any]:
        return {
            "attributes": [_attribute_ids(namespace) for namespace in _watched()],
            "hooks": _global_hook_counts(),
            "torch": torch_modes(),
            "numpy": _numpy_state(),
            "threads": thread_count(),
            "trace": (sys.gettrace(), sys.getprofile(), threading.gettrace()),
        }

    def restore(self) -> None:
        """Put back everything listed in the module docstring as put back."""
        for name in [name for name in sys.modules if name not in self.modules]:
            module = sys.modules[name]
            top = name.partition(".")[0]
            # A library module imported on first use stays (as after the parent's import);
            # a project module or a mutant is imported afresh by the next run.
            if not (_is_library(module) or (top != name and top in self.modules)):
                del sys.modules[name]
        for name, module in self.modules.items():
            if sys.modules.get(name) is not module:
                sys.modules[name] = module
        sys.path[:] = self.path
        sys.meta_path[:] = self.meta_path
        sys.path_hooks[:] = self.path_hooks
        sys.path_importer_cache.clear()
        for name in [name for name in linecache.cache if name not in self.lines]:
            del linecache.cache[name]
        sys.argv[:] = self.argv
        os.chdir(self.cwd)
        if dict(os.environ) != self.environ:
            os.environ.clear()
            os.environ.update(self.environ)
        namespace = vars(builtins)
        for name in [name for name in namespace if name not in self.builtins]:
            del namespace[name]
        namespace.update(self.builtins)
        warnings.filters[:] = self.filters
        warnings._filters_mutated()  # type: ignore[attr-defined]
        root = logging.getLogger()
        root.handlers[:], level, disabled = self.logging
        root.setLevel(level)
        logging.disable(disabled)
        for number, handler in self.signals.items():
            if signal.getsignal(number) is not handler and handler is not None:
                with contextlib.suppress(OSError, ValueError, TypeError):
                    signal.signal(number, handler)
        sys.setrecursionlimit(self.recursion)
        enabled, threshold = self.gc
        gc.set_threshold(*threshold)
        (gc.enable if enabled else gc.disable)()
        _set_torch_modes(self.modes)
        gc.collect()

    def check(self, descriptors: set[int]) -> str | None:
        """Why this process must not run another run (None: it may). ``descriptors``: the
        open descriptors it should have now."""
        now = self._fingerprint()
        for _ in range(20):  # a joined thread's task can linger a moment in /proc
            if now["threads"] == self.fingerprint["threads"]:
                break
            time.sleep(0.005)
            now["threads"] = thread_count()
        changed = [name for name, value in now.items() if self.fingerprint[name] != value]
        if changed:
            return f"changed after the reset: {', '.join(changed)}"
        if open_descriptors() != descriptors:
            return "open file descriptors differ"
        if _has_children():
            return "child processes alive"
        memory = resident_mb()
        if self.memory_after_first is None:
            self.memory_after_first = memory
        elif memory > self.memory_after_first + MEMORY_MARGIN_MB:
            return f"resident memory grew to {memory:.0f} MB"
        return None


def _has_children() -> bool:
    pid = os.getpid()
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/children", "rb") as f:
            if f.read().strip():
                return True
    return False
