"""The parent: runs many ``RunSpec``s at once in forked (or reused) processes, caches results.

``run_sweep(specs, results_dir)`` is the whole API. For each spec it either returns the
cached ``result.json`` (``cache``) or starts the run (``launch``: a fork of this warm
process, or a fresh interpreter where fork is unsafe; a CPU run may go to an idle forked
process that ended its previous run ``ok`` and reset itself, see ``reuse``), enforces its
deadline and memory cap (``watch``), reaps it (or takes its "done"), concludes its status
and row (``ending``) and writes its result atomically. This module is the scheduling
between them. Failures of a run are data: nothing a run does makes ``run_sweep`` raise.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from experiments import interrupt
from experiments.harness import launch, pool, reaper, seal, store, watch, workdir
from experiments.harness.active import ActiveRun
from experiments.harness.budget import Budget, split_references
from experiments.harness.cache import TRANSIENT, cached_row
from experiments.harness.child import NONCE_ENV, STDERR_FILE, STDOUT_FILE
from experiments.harness.ending import conclude
from experiments.harness.gpu import (
    DEFAULT_RUNS_PER_GPU,
    GpuSlots,
    child_environment,
    spreads_over_gpus,
)
from experiments.harness.outcap import OutputCap
from experiments.harness.row import COUNTERS, result_row
from experiments.harness.spec import RunSpec
from experiments.harness.status import OK_STATUSES
from experiments.harness.warm import fork_is_safe, warm_up
from experiments.trace import RESULT_FILE

# Budget, COUNTERS and TRANSIENT are imported from here by older code and tests.
__all__ = [
    "COUNTERS",
    "DEFAULT_REUSE",
    "OK_STATUSES",
    "TRANSIENT",
    "Budget",
    "Runner",
    "run_sweep",
]

Progress = Callable[[int, int, int, int], None]  # (done, total, cached, failed)
LOCK_RETRY_S = 0.2
# CPU runs one forked process serves in sequence. 1 by default: DESIGN.md's contract is a
# process per run, and a reused process's heap makes peak memory (an outcome) not
# comparable between runs. ``budget.reuse=16`` amortises the ~30-50 ms of CPU a fork of
# the ~440 MB warm parent costs (experiments.harness.reuse; tests/test_harness_reuse.py
# shows reused runs equal to a fork per run, byte for byte, memory and times aside).
DEFAULT_REUSE = 1


class Runner:
    def __init__(
        self,
        results_dir: str | Path,
        workers: int | None = None,
        budget: Budget | None = None,
        start_method: str = "auto",
        progress: Progress | None = None,
        gpus: Sequence[str] | None = None,
        runs_per_gpu: int = DEFAULT_RUNS_PER_GPU,
        retry_failed: bool = False,
        reuse: int = DEFAULT_REUSE,
    ) -> None:
        if start_method not in ("auto", "fork", "spawn"):
            raise ValueError(f"start_method must be auto, fork or spawn, not {start_method!r}")
        # Absolute: a child may change its working directory before it opens its run folder.
        self.results_dir = Path(results_dir).resolve()
        self.workers = max(1, workers or os.cpu_count() or 1)
        # device=cuda runs are spread over ``gpus``; more at once than places would wait.
        self._gpu_slots = GpuSlots(gpus, runs_per_gpu) if gpus else None
        if self._gpu_slots is not None:
            self.workers = min(self.workers, self._gpu_slots.capacity)
        self.budget = budget or Budget()
        self.start_method = start_method
        self.progress = progress
        self.retry_failed = retry_failed  # rerun cached timeouts, OOMs and kills
        # Runs one forked process may serve in sequence (1: a fresh fork per run); see
        # ``experiments.harness.reuse`` for what stays isolated between them.
        if not (isinstance(reuse, int) and reuse >= 1):
            raise ValueError(f"reuse={reuse!r}: must be a whole number >= 1")
        self.reuse = reuse
        self._idle: list[pool.Worker] = []
        self.retired: dict[str, int] = {}  # why reused processes retired after an ok run
        self._sealer = seal.Sealer(self.results_dir)
        self._active: dict[int, ActiveRun] = {}
        self._rows: dict[str, dict[str, Any]] = {}
        self._total = self._done = self._cached = self._failed = 0

    # -- public -------------------------------------------------------------------------
    def run(self, specs: Iterable[RunSpec]) -> list[dict[str, Any]]:
        unique: dict[str, RunSpec] = {}
        for spec in specs:
            unique.setdefault(spec.key, spec)
        self._total = len(unique)
        self._done = self._cached = self._failed = 0
        workdir.remove_stale()
        references, others = split_references(list(unique.values()))
        # Orphans of ended runs come up to this process, which ends them (``reaper``).
        with reaper.subreaper():
            try:
                self._run_all(list(references.values()), {})
                deadlines = {
                    group: self.budget.deadline_after(self._rows.get(spec.key))
                    for group, spec in references.items()
                }
                self._run_all(others, deadlines)
            finally:
                self._kill_all()
        return [self._rows[key] for key in unique if key in self._rows]

    # -- scheduling ---------------------------------------------------------------------
    def _run_all(self, specs: list[RunSpec], deadlines: dict[Any, float]) -> None:
        queue = deque(specs)
        while queue or self._active:
            interrupt.check()  # a Ctrl-C whose KeyboardInterrupt a fork callback swallowed
            blocked: list[RunSpec] = []
            while queue and len(self._active) < self.workers:
                spec = queue.popleft()
                if not self._start_or_finish_cached(spec, deadlines):
                    blocked.append(spec)  # another process holds its lock: come back later
            queue.extend(blocked)
            if not self._active:
                if queue:
                    time.sleep(LOCK_RETRY_S)
                continue
            watch.wait(self._active.values(), LOCK_RETRY_S if blocked else None)
            watch.check_limits(self._active.values())
            self._reap()

    def _start_or_finish_cached(self, spec: RunSpec, deadlines: dict[Any, float]) -> bool:
        key = spec.key
        folder = store.run_dir(self.results_dir, key)
        cached = self._reusable(spec, folder)
        if cached is not None:
            self._finish_row(key, cached, folder, was_cached=True)
            return True
        lock = store.try_lock(folder)
        if lock is None:
            return False
        cached = self._reusable(spec, folder)  # finished by the lock's last holder
        if cached is not None:
            store.unlock(lock)
            self._finish_row(key, cached, folder, was_cached=True)
            return True
        store.reset_folder(folder)
        timeout_s = self.budget.timeout_for(spec, deadlines)
        if spec.invalid_reason is not None:
            row = result_row(spec, key, "invalid", "MutationError", spec.invalid_reason, {})
            row.update(timeout_s=timeout_s, wall_s=0.0, exit_code=None, budget=self.budget.of(spec))
            self._write_result(folder, row, lock)
            return True
        try:
            self._launch(spec, key, folder, lock, timeout_s)
        except OSError as error:  # fork/exec failed: the run is data, the sweep goes on
            row = result_row(spec, key, "crash", type(error).__name__, str(error), {})
            row.update(timeout_s=timeout_s, wall_s=0.0, exit_code=None, budget=self.budget.of(spec))
            self._write_result(folder, row, lock)
        return True

    def _reusable(self, spec: RunSpec, folder: Path) -> dict[str, Any] | None:
        return cached_row(spec, folder, self._sealer, self.budget, self.retry_failed)

    def _launch(self, spec: RunSpec, key: str, folder: Path, lock: int, timeout_s: float) -> None:
        method = self.start_method
        if method == "auto":
            method = "fork" if fork_is_safe() else "spawn"
        config, main_source = launch.prepare(
            spec,
            key,
            folder,
            results_dir=self.results_dir,
            method=method,
            trace_cap_mb=self.budget.trace_cap_mb,
        )
        run_workdir = config["workdir"]
        nonce = secrets.token_hex(16)
        rss_cap_mb = reaper.rss_mb(os.getpid()) + spec.mem_cap_mb
        process = None
        gpu = None
        if self._gpu_slots is not None and spreads_over_gpus(spec.device):
            gpu = self._gpu_slots.acquire()  # workers <= capacity, so a place is free
        worker, reused = None, False
        try:
            if method == "fork":
                warm_up()
                started = time.monotonic()
                reusable = self.reuse > 1 and gpu is None and spec.device == "cpu"
                job = {**config, "nonce": nonce, "reuse": self.reuse if reusable else 1}
                worker = self._idle_worker(job, main_source) if reusable else None
                if worker is not None:
                    pid, reused = worker.pid, True
                else:
                    pid, worker = self._fork(job, main_source, lock, gpu, reusable)
            else:
                started = time.monotonic()
                process = launch.spawn(folder, {**child_environment(gpu), NONCE_ENV: nonce})
                pid = process.pid
                rss_cap_mb = spec.mem_cap_mb + 1024.0  # a fresh interpreter's torch: ~0.5-1 GB
        except OSError:
            self._release_gpu(gpu)
            workdir.remove(run_workdir)
            raise
        self._active[pid] = ActiveRun(
            spec,
            key,
            folder,
            lock,
            pid,
            started,
            timeout_s,
            rss_cap_mb,
            process,
            gpu=gpu,
            workdir=run_workdir,
            nonce=nonce,
            worker=worker,
            reused=reused,
            outputs=tuple(
                OutputCap(folder / name, int(self.budget.output_cap_mb * 2**20))
                for name in (STDOUT_FILE, STDERR_FILE)
            ),
        )

    def _idle_worker(self, job: dict[str, Any], source: str) -> pool.Worker | None:
        """An idle run process that took ``job``; None: fork a fresh one."""
        while self._idle:
            worker = self._idle.pop()
            if pool.send(worker, job, source):
                return worker
            pool.retire(worker)  # it died while idle
        return None

    def _fork(
        self, job: dict[str, Any], source: str, lock: int, gpu: str | None, reusable: bool
    ) -> tuple[int, pool.Worker | None]:
        # The child must not hold the parent's run locks or the other workers' channels.
        held = [active.lock for active in self._active.values()] + [lock]
        for other in [*self._idle, *(a.worker for a in self._active.values() if a.worker)]:
            held.extend(other.descriptors())
        return launch.fork(job, source, held, gpu, reusable)

    def _release_gpu(self, gpu: str | None) -> None:
        if gpu is not None and self._gpu_slots is not None:
            self._gpu_slots.release(gpu)

    def _kill_all(self) -> None:
        """On the way out (an exception, Ctrl-C): no run outlives the sweep. Their folders
        stay without a result, so the next sweep reruns them. Idle run processes end too."""
        while self._idle:
            pool.retire(self._idle.pop())
        for active in list(self._active.values()):
            watch.kill(active, None)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(active.pid, 0)
            store.unlock(active.lock)
            self._release_gpu(active.gpu)
            workdir.remove(active.workdir)
            if active.worker is not None:
                pool.close(active.worker.descriptors())
        self._active.clear()
        reaper.end_adopted(set())

    def _reap(self) -> None:
        for pid in list(self._active):
            worker = self._active[pid].worker
            message = pool.poll(worker) if worker is not None else None
            if worker is not None and message is not None:
                self._finish_in_worker(self._active.pop(pid), worker, message)
                continue
            try:
                # WNOWAIT: the process stays a zombie, so its pid (= its group id) cannot be
                # reused before the group's leftovers are killed below.
                info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                info = None
            else:
                if info is None:
                    continue
            active = self._active.pop(pid)
            self._release_gpu(active.gpu)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)  # grandchildren (data loader workers...)
            reaper.kill_tree(pid)
            wait_status, peak_rss_mb = 0, None
            try:
                _, wait_status, usage = os.wait4(pid, 0)
                peak_rss_mb = round(usage.ru_maxrss / 1024, 2)
            except ChildProcessError:
                pass
            if active.process is not None:
                active.process.returncode = os.waitstatus_to_exitcode(wait_status)
            if active.worker is not None:
                pool.poll(active.worker)  # a last word: why it retired
                if active.worker.retired:
                    reason = active.worker.retired
                    self.retired[reason] = self.retired.get(reason, 0) + 1
                pool.close(active.worker.descriptors())
            # Descendants that left its session came up to this process when it died.
            reaper.end_adopted(self._live_pids())
            workdir.remove(active.workdir)  # the process group is dead: nothing writes there
            self._complete(active, wait_status, peak_rss_mb, time.monotonic() - active.started)

    def _finish_in_worker(
        self, active: ActiveRun, worker: pool.Worker, message: dict[str, Any]
    ) -> None:
        """A run that ended ``ok`` in a process that stays for the next run (it checked
        that it has no descendants left and its state is back to where it started)."""
        wall_s = time.monotonic() - active.started
        worker.runs += 1
        self._idle.append(worker)
        self._release_gpu(active.gpu)
        workdir.remove(active.workdir)  # the run is over: nothing of it writes there
        code = int(message["code"])
        peak = message.get("peak_rss_mb")
        self._complete(active, (code & 0xFF) << 8, peak, wall_s)

    def _live_pids(self) -> set[int]:
        """Processes of this sweep that are not orphans: active runs and idle workers."""
        return set(self._active) | {worker.pid for worker in self._idle}

    # -- results ------------------------------------------------------------------------
    def _complete(
        self, active: ActiveRun, wait_status: int, peak_rss_mb: float | None, wall_s: float
    ) -> None:
        row = conclude(active, wait_status, peak_rss_mb, wall_s, self.budget)
        self._write_result(active.folder, row, active.lock)

    def _write_result(self, folder: Path, row: dict[str, Any], lock: int) -> None:
        row = self._sealer.seal(row)  # kept in the row: who rewrites it keeps the seal
        try:
            store.write_json_atomic(folder / RESULT_FILE, row)
        finally:
            store.unlock(lock)
        self._finish_row(row["key"], row, folder, was_cached=False)

    def _finish_row(self, key: str, row: dict[str, Any], folder: Path, was_cached: bool) -> None:
        row = dict(row, run_dir=str(folder), cached=was_cached)
        self._rows[key] = row
        self._done += 1
        self._cached += was_cached
        self._failed += row.get("status") not in OK_STATUSES
        if self.progress is not None:
            self.progress(self._done, self._total, self._cached, self._failed)


def run_sweep(
    specs: Iterable[RunSpec],
    results_dir: str | Path,
    workers: int | None = None,
    progress: Progress | None = None,
    budget: Budget | None = None,
    start_method: str = "auto",
    gpus: Sequence[str] | None = None,
    runs_per_gpu: int = DEFAULT_RUNS_PER_GPU,
    retry_failed: bool = False,
    reuse: int = DEFAULT_REUSE,
) -> list[dict[str, Any]]:
    """Run (or load from the cache) every spec; one result row per distinct run, in the
    order given. ``progress(done, total, cached, failed)`` is called after each run.
    With ``gpus``, ``device=cuda`` runs go ``runs_per_gpu`` at a time to each of them.
    ``retry_failed`` reruns cached ``timeout``/``oom``/``killed`` rows. ``reuse``: runs
    one forked process may serve in sequence (``experiments.harness.reuse``)."""
    runner = Runner(
        results_dir,
        workers,
        budget,
        start_method,
        progress,
        gpus,
        runs_per_gpu,
        retry_failed,
        reuse,
    )
    return runner.run(specs)
