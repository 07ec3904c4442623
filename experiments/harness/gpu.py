"""Several runs per GPU, spread over every visible GPU, without the parent touching CUDA.

The parent forks its runs, and a process that has initialised CUDA cannot fork usable
children: so the parent never asks the CUDA driver anything itself. It reads
``CUDA_VISIBLE_DEVICES`` when set, and otherwise asks a forked child how many GPUs torch
sees. Each ``device=cuda`` run then gets one GPU through its own ``CUDA_VISIBLE_DEVICES``
(set in the child before torch initialises CUDA), so the script's ``--device cuda`` lands
on that GPU as ``cuda:0``. A run with an explicit index (``cuda:1``) is left as given.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"
DEFAULT_RUNS_PER_GPU = 8


def spreads_over_gpus(device: str) -> bool:
    """Only a bare ``cuda`` is ours to place; ``cuda:N`` names its GPU already."""
    return device == "cuda"


def parse_visible_devices(value: str) -> list[str]:
    """The GPUs a ``CUDA_VISIBLE_DEVICES`` value exposes, as CUDA reads it: entries up to
    the first invalid one (``-1`` hides every GPU), indices or ``GPU-``/``MIG-`` UUIDs."""
    devices: list[str] = []
    for entry in (part.strip() for part in value.split(",")):
        if entry.isdigit() or entry.startswith(("GPU-", "MIG-")):
            devices.append(entry)
        else:
            break
    return devices


def visible_gpus(environ: Mapping[str, str] | None = None) -> list[str]:
    """The GPU ids this process may hand to its runs, without initialising CUDA here."""
    environ = os.environ if environ is None else environ
    value = environ.get(VISIBLE_DEVICES)
    if value is not None:
        return parse_visible_devices(value)
    return [str(index) for index in range(_count_in_a_child())]


def _count_in_a_child() -> int:
    """``torch.cuda.device_count()`` asked by a forked child: the CUDA runtime it starts
    dies with the child, so this process stays safe to fork."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        count = 0
        try:
            import torch

            count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        except BaseException:
            count = 0
        finally:
            os.write(write_end, str(count).encode())
            os._exit(0)
    os.close(write_end)
    try:
        with os.fdopen(read_end, "rb") as reader:
            answer = reader.read()
    finally:
        os.waitpid(pid, 0)
    return int(answer) if answer.strip().isdigit() else 0


class GpuSlots:
    """``runs_per_gpu`` places on each GPU; a run takes the least busy GPU (the lowest
    listed among equals), so a sweep fills all GPUs evenly rather than one first."""

    def __init__(self, gpus: Sequence[str], runs_per_gpu: int = DEFAULT_RUNS_PER_GPU) -> None:
        if not gpus:
            raise ValueError("device=cuda but no GPU is visible (CUDA_VISIBLE_DEVICES, torch)")
        if runs_per_gpu < 1:
            raise ValueError(f"runs_per_gpu must be at least 1, not {runs_per_gpu}")
        if len(set(gpus)) != len(gpus):
            raise ValueError(f"a GPU is listed twice: {list(gpus)}")
        self.runs_per_gpu = runs_per_gpu
        self._busy: dict[str, int] = dict.fromkeys(gpus, 0)

    @property
    def capacity(self) -> int:
        return len(self._busy) * self.runs_per_gpu

    def busy(self) -> dict[str, int]:
        return dict(self._busy)

    def acquire(self) -> str | None:
        """A GPU with a free place (now taken), or None when all are full."""
        gpu = min(self._busy, key=self._busy.__getitem__)
        if self._busy[gpu] >= self.runs_per_gpu:
            return None
        self._busy[gpu] += 1
        return gpu

    def release(self, gpu: str) -> None:
        if self._busy.get(gpu, 0) <= 0:
            raise ValueError(f"GPU {gpu!r} has no run to release")
        self._busy[gpu] -= 1


def rotated(gpus: Sequence[str], start: int) -> list[str]:
    """``gpus`` beginning at ``start`` (mod their number): jobs that each fill GPUs from
    the first listed would all crowd the same one."""
    if not gpus:
        return []
    start %= len(gpus)
    return [*gpus[start:], *gpus[:start]]


def child_environment(gpu: str | None) -> dict[str, str]:
    """The variables a run on ``gpu`` starts with (none for a CPU run)."""
    return {} if gpu is None else {VISIBLE_DEVICES: gpu}
