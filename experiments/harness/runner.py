"""The parent: runs many ``RunSpec``s at once in forked (or reused) processes, caches results.

``run_sweep(specs, results_dir)`` is the whole API. For each spec it either returns the
cached ``result.json`` or starts the run (a fork of this warm process, or a fresh
interpreter where fork is unsafe; a CPU run may go to an idle forked process that ended
its previous run ``ok`` and reset itself, see ``reuse``), enforces its deadline and
memory cap, reaps it (or takes its "done"),
decides its status (see ``status``), completes its trace and writes its result
atomically. Failures of a run are data: nothing a run does makes ``run_sweep`` raise.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments import interrupt
from experiments.harness import pool, reach, reaper, seal, store, workdir
from experiments.harness import status as rules
from experiments.harness.child import NONCE_ENV, SPEC_FILE, STDERR_FILE, STDOUT_FILE, run_forked
from experiments.harness.gpu import (
    DEFAULT_RUNS_PER_GPU,
    GpuSlots,
    child_environment,
    spreads_over_gpus,
)
from experiments.harness.outcap import OutputCap
from experiments.harness.spec import HARNESS_VERSION, RunSpec, torch_version
from experiments.harness.warm import fork_is_safe, warm_up
from experiments.trace import RESULT_FILE, TRACE_FILE, decode_float, read_trace

Progress = Callable[[int, int, int, int], None]  # (done, total, cached, failed)
MUTANT_FILE = "mutant.py"
TAIL_BYTES = 65536
LOCK_RETRY_S = 0.2
MEMORY_POLL_S = 0.25
OK_STATUSES = ("ok", "nan")
TRACEBACK_START = "Traceback (most recent call last):"
# A mutant whose changed statements never ran behaves as the script: when the run ended on
# its own with one of these, its status becomes ``unreached`` (a timeout or a kill may have
# come before the mutated lines would have run, so those keep theirs).
UNREACHED_FROM = ("ok", "nan", "crash", "invalid")
# Statuses that say more about the machine or the budget than about the mutant: rerun
# when the budget changed or when asked (``retry_failed``), reused otherwise.
TRANSIENT = ("timeout", "oom", "killed")
# CPU runs one forked process serves in sequence. 1 by default: DESIGN.md's contract is a
# process per run, and a reused process's heap makes peak memory (an outcome) not
# comparable between runs. ``budget.reuse=16`` amortises the ~30-50 ms of CPU a fork of
# the ~440 MB warm parent costs (experiments.harness.reuse; tests/test_harness_reuse.py
# shows reused runs equal to a fork per run, byte for byte, memory and times aside).
DEFAULT_REUSE = 1


@dataclass(frozen=True)
class Budget:
    """Deadlines: a mutant gets ``factor * reference wall + slack_s`` (at most
    ``max_timeout_s``); a run without a reference (and the reference itself) gets
    ``default_timeout_s``."""

    factor: float = 5.0
    slack_s: float = 10.0
    default_timeout_s: float = 600.0
    max_timeout_s: float = 3600.0
    output_cap_mb: float = 16.0  # per stream (stdout, stderr): half head, half tail kept
    trace_cap_mb: float = 64.0  # the trace is thinned beyond this

    def __post_init__(self) -> None:
        for name in (
            "factor",
            "default_timeout_s",
            "max_timeout_s",
            "output_cap_mb",
            "trace_cap_mb",
        ):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and 0 < value < float("inf")):
                raise ValueError(f"budget {name}={value!r}: must be a positive finite number")
        if not (isinstance(self.slack_s, int | float) and 0 <= self.slack_s < float("inf")):
            raise ValueError(f"budget slack_s={self.slack_s!r}: must be a finite number >= 0")

    def of(self, spec: RunSpec) -> dict[str, Any]:
        """What decided a run's deadline, memory cap and output caps (kept in its row)."""
        return {
            "factor": self.factor,
            "slack_s": self.slack_s,
            "default_timeout_s": self.default_timeout_s,
            "max_timeout_s": self.max_timeout_s,
            "timeout_s": spec.timeout_s,
            "mem_cap_mb": spec.mem_cap_mb,
            "output_cap_mb": self.output_cap_mb,
            "trace_cap_mb": self.trace_cap_mb,
        }

    def deadline_from(self, reference_wall_s: float) -> float:
        return min(self.max_timeout_s, self.factor * reference_wall_s + self.slack_s)


@dataclass
class _Active:
    spec: RunSpec
    key: str
    folder: Path
    lock: int
    pid: int
    started: float
    timeout_s: float
    rss_cap_mb: float
    process: subprocess.Popen[bytes] | None = None
    killed_for: str | None = None
    gpu: str | None = None  # its place in the GPU slots, given back when it ends
    last_poll: float = field(default=0.0)
    workdir: str | None = None  # the run's private mirror of the invocation folder
    nonce: str = ""  # the child's end record carries it: one appended by the script does not
    outputs: tuple[OutputCap, ...] = ()
    worker: pool.Worker | None = None  # a process that may serve more runs (``reuse``)
    reused: bool = False  # the process served an earlier run before this one


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
        self._active: dict[int, _Active] = {}
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
        references, others = _split_references(list(unique.values()))
        # Orphans of ended runs come up to this process, which ends them (``reaper``).
        with reaper.subreaper():
            try:
                self._run_all(list(references.values()), {})
                deadlines = {
                    group: self._deadline_after(self._rows.get(spec.key))
                    for group, spec in references.items()
                }
                self._run_all(others, deadlines)
            finally:
                self._kill_all()
        return [self._rows[key] for key in unique if key in self._rows]

    # -- scheduling ---------------------------------------------------------------------
    def _deadline_after(self, reference: dict[str, Any] | None) -> float:
        if reference and reference.get("status") in OK_STATUSES and reference.get("wall_s"):
            return self.budget.deadline_from(float(reference["wall_s"]))
        return self.budget.default_timeout_s

    def _timeout_for(self, spec: RunSpec, deadlines: dict[Any, float]) -> float:
        if spec.timeout_s is not None:
            return spec.timeout_s
        return deadlines.get(spec.group, self.budget.default_timeout_s)

    def _run_all(self, specs: list[RunSpec], deadlines: dict[Any, float]) -> None:
        queue = deque(specs)
        while queue or self._active:
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
            self._wait(LOCK_RETRY_S if blocked else None)
            self._check_limits()
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
        timeout_s = self._timeout_for(spec, deadlines)
        if spec.invalid_reason is not None:
            row = _result_row(spec, key, "invalid", "MutationError", spec.invalid_reason, {})
            row.update(timeout_s=timeout_s, wall_s=0.0, exit_code=None, budget=self.budget.of(spec))
            self._write_result(folder, row, lock)
            return True
        try:
            self._launch(spec, key, folder, lock, timeout_s)
        except OSError as error:  # fork/exec failed: the run is data, the sweep goes on
            row = _result_row(spec, key, "crash", type(error).__name__, str(error), {})
            row.update(timeout_s=timeout_s, wall_s=0.0, exit_code=None, budget=self.budget.of(spec))
            self._write_result(folder, row, lock)
        return True

    def _reusable(self, spec: RunSpec, folder: Path) -> dict[str, Any] | None:
        """The cached row, if the harness wrote it for this run (shape and seal) and it
        is not a transient failure to retry; None: run it (again)."""
        row = store.read_result(folder)
        if row is None or not self._sealer.trusted(row, spec.key):
            return None
        if row["status"] in TRANSIENT and (
            self.retry_failed or row["budget"] != self.budget.of(spec)
        ):
            return None
        return row

    def _launch(self, spec: RunSpec, key: str, folder: Path, lock: int, timeout_s: float) -> None:
        method = self.start_method
        if method == "auto":
            method = "fork" if fork_is_safe() else "spawn"
        invocation = spec.cwd or os.getcwd()
        script = os.path.abspath(spec.script)
        module_target = spec.target if spec.target and not _same_file(spec.target, script) else None
        main_source, source_path = spec.text(), script
        if spec.mutant is not None:
            mutant_path = str(folder / MUTANT_FILE)
            Path(mutant_path).write_text(main_source, encoding="utf-8")
            if module_target:  # the script runs as it is; the import hook serves the mutant
                main_source = Path(script).read_text(encoding="utf-8")
            else:
                source_path = mutant_path
        run_workdir = str(workdir.create(invocation, exclude=[self.results_dir]))
        nonce = secrets.token_hex(16)
        config = {
            "run_dir": str(folder),
            # Seen from inside the mirror: ``__file__``-relative paths stay private too.
            "script": workdir.mirrored_path(run_workdir, invocation, script),
            "source_path": source_path,
            "argv": list(spec.argv),
            "seed": spec.seed,
            "device": spec.device,
            "threads": spec.threads,
            "mem_cap_mb": spec.mem_cap_mb,
            "sample_every": spec.sample_every,
            "telemetry": spec.telemetry,
            "workdir": run_workdir,
            "guard": True,
            "protected": [str(Path(invocation).resolve()), os.path.dirname(script)],
            "reach_regions": (spec.mutant or {}).get("reach_regions") or [],
            "module_target": module_target,
            "module_source_path": str(folder / MUTANT_FILE) if module_target else None,
            "holdout": spec.holdout,
            "metrics": spec.metrics,
            "parent_pid": os.getpid(),
            "start_method": method,
            "key": key,
            "trace_cap_bytes": int(self.budget.trace_cap_mb * 2**20),
        }
        # The nonce never lies in the run folder: the forked child gets it in memory, a
        # fresh interpreter in its environment (which it clears before the script runs).
        (folder / SPEC_FILE).write_text(json.dumps(config, indent=1), encoding="utf-8")
        rss_cap_mb = reaper.rss_mb(os.getpid()) + spec.mem_cap_mb
        process = None
        gpu = None
        if self._gpu_slots is not None and spreads_over_gpus(spec.device):
            gpu = self._gpu_slots.acquire()  # workers <= capacity, so a place is free
        worker, reused = None, False
        try:
            if method == "fork":
                warm_up()
                interrupt.ready()  # loaded: Ctrl-C raises again, and the runs are ended
                started = time.monotonic()
                reusable = self.reuse > 1 and gpu is None and spec.device == "cpu"
                job = {**config, "nonce": nonce, "reuse": self.reuse if reusable else 1}
                worker = self._idle_worker(job, main_source) if reusable else None
                if worker is not None:
                    pid, reused = worker.pid, True
                else:
                    pid, worker = self._fork(job, main_source, lock, gpu, reusable)
            else:
                interrupt.ready()
                started = time.monotonic()
                process = _spawn(folder, {**child_environment(gpu), NONCE_ENV: nonce})
                pid = process.pid
                rss_cap_mb = spec.mem_cap_mb + 1024.0  # a fresh interpreter's torch: ~0.5-1 GB
        except OSError:
            self._release_gpu(gpu)
            workdir.remove(run_workdir)
            raise
        self._active[pid] = _Active(
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
        ours, theirs = pool.channel() if reusable else ((), None)
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError:
            pool.close((*ours, *(theirs or ())))
            raise
        if pid == 0:
            os.environ.update(child_environment(gpu))  # before CUDA starts there
            run_forked(job, source, close_fds=(*held, *ours), channel=theirs)
        if theirs is None:
            return pid, None
        pool.close(theirs)
        return pid, pool.Worker(pid, *ours)

    def _release_gpu(self, gpu: str | None) -> None:
        if gpu is not None and self._gpu_slots is not None:
            self._gpu_slots.release(gpu)

    # -- watching -----------------------------------------------------------------------
    def _wait(self, at_most: float | None) -> None:
        """Sleep until a child ends, the next deadline or the next memory poll."""
        now = time.monotonic()
        timeout = MEMORY_POLL_S
        for active in self._active.values():
            timeout = min(timeout, max(0.0, active.started + active.timeout_s - now))
        if at_most is not None:
            timeout = min(timeout, at_most)
        descriptors = []
        with contextlib.suppress(AttributeError, OSError):
            descriptors = [os.pidfd_open(pid) for pid in self._active]
        # A reused run process says "done" on its channel instead of exiting.
        channels = [active.worker.done for active in self._active.values() if active.worker]
        try:
            if descriptors:
                select.select(descriptors + channels, [], [], timeout)
            else:
                time.sleep(min(timeout, 0.02))
        finally:
            for descriptor in descriptors:
                os.close(descriptor)

    def _check_limits(self) -> None:
        now = time.monotonic()
        for active in self._active.values():
            if active.killed_for:
                continue
            if now - active.started > active.timeout_s:
                self._kill(active, "timeout")
            elif now - active.last_poll >= MEMORY_POLL_S:
                active.last_poll = now
                for output in active.outputs:
                    output.check()
                if reaper.tree_memory_mb(active.pid) > active.rss_cap_mb:
                    self._kill(active, "oom")

    def _kill(self, active: _Active, reason: str | None) -> None:
        if active.killed_for is None:
            active.killed_for = reason
        reaper.kill_tree(active.pid)  # its descendants, wherever their session
        try:
            os.killpg(active.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            with contextlib.suppress(ProcessLookupError):  # before its setsid
                os.kill(active.pid, signal.SIGKILL)

    def _kill_all(self) -> None:
        """On the way out (an exception, Ctrl-C): no run outlives the sweep. Their folders
        stay without a result, so the next sweep reruns them. Idle run processes end too."""
        while self._idle:
            pool.retire(self._idle.pop())
        for active in list(self._active.values()):
            self._kill(active, None)
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
        self, active: _Active, worker: pool.Worker, message: dict[str, Any]
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
        self, active: _Active, wait_status: int, peak_rss_mb: float | None, wall_s: float
    ) -> None:
        trace_path = active.folder / TRACE_FILE
        end = _last_end_record(trace_path)
        if end is not None and end.get("nonce") != active.nonce:
            end = None  # an end record the child did not write (the script appended it)
        if end is not None and active.killed_for is None:
            counters = end
            status, exc_type, message = end["status"], end.get("exc_type"), end.get("exc_message")
            exit_code = end.get("exit_code")
            nonfinite = end.get("nonfinite")
        else:
            counters, nonfinite = _scan_trace(trace_path)
            counters["telemetry"] = active.spec.telemetry
            if active.killed_for == "timeout":
                status, exc_type = "timeout", "Timeout"
                message = f"no end within {active.timeout_s:.1f} s"
                exit_code = -signal.SIGKILL
            elif active.killed_for == "oom":
                status, exc_type = "oom", "MemoryCap"
                message = f"resident memory above {active.rss_cap_mb:.0f} MB"
                exit_code = -signal.SIGKILL
            else:
                status, exc_type, message, exit_code = rules.after_abrupt_end(
                    wait_status, counters, nonfinite is not None
                )
            _append_end(
                trace_path,
                wall_s,
                status=status,
                exc_type=exc_type,
                exc_message=message,
                exit_code=exit_code,
                nonfinite=nonfinite,
                written_by="parent",
                **{name: counters.get(name, 0) for name in COUNTERS},
            )
        if exc_type == "SystemExit":  # argparse's "error: ..." says more than its exit code
            message = _last_stderr_line(active.folder) or message
        reached = reach.summary(counters.get("reach"))
        unreached = active.spec.mutant is not None and reached["reached"] is False
        if unreached and status in UNREACHED_FROM:
            status = "unreached"
        row = _result_row(active.spec, active.key, status, exc_type, message, counters)
        row.update(reached)
        row.update(
            wall_s=round(wall_s, 4),
            exit_code=exit_code,
            peak_rss_mb=peak_rss_mb,
            peak_cuda_mb=counters.get("peak_cuda_mb"),
            nonfinite_at=nonfinite,
            timeout_s=round(active.timeout_s, 3),
            start_method=_start_method(active),
            budget=self.budget.of(active.spec),
            output_dropped={output.path.name: output.finish() for output in active.outputs},
            trace_dropped=counters.get("trace_dropped"),
        )
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


COUNTERS = (
    "steps",
    "backward_calls",
    "loss_fn_calls",
    "train_forwards",
    "train_forwards_eval_mode",
    "eval_forwards",
    "eval_forwards_grad",
)


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


def _split_references(specs: list[RunSpec]) -> tuple[dict[Any, RunSpec], list[RunSpec]]:
    """The unmutated run with the lowest seed of each group goes first: its wall time
    sets the deadline of every other run of the group."""
    references: dict[Any, RunSpec] = {}
    for spec in specs:
        if spec.mutant is None and spec.invalid_reason is None:
            best = references.get(spec.group)
            if best is None or spec.seed < best.seed:
                references[spec.group] = spec
    chosen = {id(spec) for spec in references.values()}
    return references, [spec for spec in specs if id(spec) not in chosen]


def _spawn(folder: Path, extra_env: dict[str, str]) -> subprocess.Popen[bytes]:
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, **extra_env}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    with open(folder / STDOUT_FILE, "ab") as out, open(folder / STDERR_FILE, "ab") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "experiments.harness.child", str(folder)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
            env=env,
        )


def _same_file(first: str, second: str) -> bool:
    return os.path.realpath(first) == os.path.realpath(second)


def _last_stderr_line(folder: Path) -> str | None:
    """The script's last words on stderr before it exited (argparse's ``error: ...``),
    not the traceback of the ``SystemExit`` that followed them."""
    try:
        with open(folder / "stderr.txt", "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 8192))
            lines = handle.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    if TRACEBACK_START in lines:
        lines = lines[: len(lines) - 1 - lines[::-1].index(TRACEBACK_START)]
    lines = [line.strip() for line in lines if line.strip()]
    return lines[-1][: rules.MESSAGE_LIMIT] if lines else None


def _start_method(active: _Active) -> str:
    if active.reused:
        return "reused"  # a forked process that ran earlier runs of the sweep first
    return "spawn" if active.process is not None else "fork"


def _last_end_record(trace_path: Path) -> dict[str, Any] | None:
    """The child's end record, if it wrote one: the last line of the trace."""
    try:
        with open(trace_path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - TAIL_BYTES))
            lines = handle.read().splitlines()
    except FileNotFoundError:
        return None
    for line in reversed(lines):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            return None
        return record if record.get("kind") == "end" else None
    return None


def _scan_trace(trace_path: Path) -> tuple[dict[str, Any], list[Any] | None]:
    """Counters of a trace that has no end record, and its first non-finite loss."""
    counters: dict[str, Any] = dict.fromkeys(COUNTERS, 0)
    nonfinite = None
    for record in read_trace(trace_path):
        kind = record.get("kind")
        if kind == "step":
            counters["steps"] = max(counters["steps"], int(record.get("i", 0)))
        elif kind in ("backward", "loss_fn"):
            name = "backward_calls" if kind == "backward" else "loss_fn_calls"
            counters[name] = max(counters[name], int(record.get("i", -1)) + 1)
            loss = decode_float(record.get("loss"))
            if nonfinite is None and loss is not None and not _finite(loss):
                nonfinite = [kind, record.get("i")]
        elif kind == "forwards":
            for name in COUNTERS[3:]:
                counters[name] = int(record.get(name, 0))
    return counters, nonfinite


def _finite(value: float) -> bool:
    return value == value and value not in (float("inf"), float("-inf"))


def _append_end(trace_path: Path, wall_s: float, **fields: Any) -> None:
    record = {"kind": "end", "t": round(wall_s, 6), **fields}
    with open(trace_path, "a+b") as handle:
        handle.seek(0, os.SEEK_END)
        if handle.tell():
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) != b"\n":  # a line torn by the kill: end it first
                handle.write(b"\n")
        handle.write(json.dumps(record).encode("utf-8") + b"\n")


def _result_row(
    spec: RunSpec,
    key: str,
    status: str,
    exc_type: str | None,
    message: str | None,
    counters: dict[str, Any],
) -> dict[str, Any]:
    mutant = spec.mutant or {}
    return {
        "key": key,
        "run_id": spec.run_id,
        "loop": spec.loop_name,
        "script": spec.script,
        "target": spec.target or spec.script,
        "identity": spec.identity,
        "operators": list(mutant.get("operators", [])),
        "categories": list(mutant.get("categories", [])),
        "contexts": list(mutant.get("contexts", [])),
        "params": list(mutant.get("params", [])),
        "lines": list(mutant.get("lines", [])),
        "mutant_lines": list(mutant.get("mutant_lines", [])),
        "reached": None,  # did the mutated statements run (None: unknown, or no mutant)
        "reach_hits": None,  # how many times they ran
        "seed_insensitive": None,  # set on reference runs by experiments.reference_gate
        "diff": mutant.get("diff", ""),
        "sha256": spec.sha256,
        "argv": list(spec.argv),
        "seed": spec.seed,
        "device": spec.device,
        "status": status,
        "exc_type": exc_type,
        "exc_message": message,
        **{name: int(counters.get(name, 0) or 0) for name in COUNTERS},
        "wall_s": None,
        "peak_rss_mb": None,
        "peak_cuda_mb": None,
        "nonfinite_at": None,
        "exit_code": None,
        "timeout_s": None,
        "mem_cap_mb": spec.mem_cap_mb,
        "budget": {},  # what produced a timeout or an OOM (``Budget.of``)
        "output_dropped": {},  # stream file -> bytes dropped from its middle
        "trace_dropped": None,  # trace records thinned away (None: unknown)
        "telemetry": spec.telemetry,
        "start_method": None,
        "torch_version": torch_version(),
        "harness_version": HARNESS_VERSION,
    }
