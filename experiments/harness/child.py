"""The run's own process: isolate it, install telemetry, run the source as ``__main__``.

Entered two ways: right after ``os.fork()`` in the warm parent (``run_forked``), or as a
fresh interpreter where fork is unavailable or unsafe (``python -m
experiments.harness.child RUN_DIR``, which reads ``RUN_DIR/spec.json``). Either way it
ends with ``os._exit``: a forked child must never return into the parent's code.
"""

from __future__ import annotations

import builtins
import ctypes
import faulthandler
import gc
import io
import json
import linecache
import os
import random
import resource
import signal
import sys
import time
import traceback
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from experiments import capture as reported
from experiments import telemetry as telemetry_api
from experiments.harness import raised as raised_record
from experiments.harness import reaper, tracecap
from experiments.harness import status as rules
from experiments.trace import TRACE_FILE

SPEC_FILE = "spec.json"
STDOUT_FILE = "stdout.txt"
STDERR_FILE = "stderr.txt"
PR_SET_PDEATHSIG = 1
SETUP_FAILED = 70  # exit code when the harness itself failed before the script ran
NONCE_ENV = "TRAINWRECK_RUN_NONCE"  # how a fresh interpreter gets its end record's nonce


def run_forked(
    config: dict[str, Any],
    source: str,
    close_fds: tuple[int, ...] = (),
    channel: tuple[int, int] | None = None,
) -> NoReturn:
    """Body of the forked child. Never returns. With ``channel`` (job reader, done
    writer), it may serve up to ``config["reuse"]`` runs in sequence (``_serve``)."""
    code = SETUP_FAILED
    try:
        # Objects inherited from the parent are not this run's garbage: keep the collector
        # from walking them (and so from copying their pages).
        gc.freeze()
        for descriptor in close_fds:  # the parent's run locks must die with the parent
            os.close(descriptor)
        os.setsid()
        reaper.become_subreaper()  # its descendants stay below it, even after setsid
        code = _run(config, source) if channel is None else _serve(config, source, channel)
    except BaseException:
        try:
            traceback.print_exc()
            sys.stderr.flush()
        except BaseException:
            pass
    finally:
        os._exit(code)


def _serve(config: dict[str, Any], source: str, channel: tuple[int, int]) -> int:
    """Run, then, while each run ends ``ok`` and leaves the process as it found it
    (``reuse.Snapshot``), tell the parent and take its next run; the exit code of the last
    run otherwise (the parent then reaps this process as a one-run process)."""
    from experiments.harness import pool, reuse

    jobs, done = channel
    snapshot = reuse.Snapshot()
    descriptors = reuse.open_descriptors()
    left = int(config.get("reuse", 1))
    while True:
        outcome: dict[str, Any] = {}
        code = _run(config, source, outcome)
        left -= 1
        if left <= 0 or outcome.get("status") != "ok":
            return code
        snapshot.restore()
        why = snapshot.check(descriptors)
        if why is not None:
            pool.report(done, {"retired": why})  # counted by the parent, for diagnosis
            return code
        pool.report(done, {"code": code, "peak_rss_mb": outcome.get("peak_rss_mb")})
        job = pool.receive(jobs)
        if job is None:  # the sweep is over
            return 0
        config, source = job


def _die_with_parent(parent_pid: int) -> None:
    """A killed sweep must not leave runs behind writing into folders a rerun clears."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(SETUP_FAILED)


def _redirect_output(run_dir: Path) -> None:
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    for descriptor, name in ((1, STDOUT_FILE), (2, STDERR_FILE)):
        # Append: a fresh interpreter's early output already went to these files.
        target = os.open(run_dir / name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(target, descriptor)
        os.close(target)
    # The parent's sys.stdout may be a capture object (pytest) or hold a buffer: replace
    # both streams with fresh ones on the redirected descriptors.
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True)
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), line_buffering=True, errors="backslashreplace"
    )
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))


def _limit_memory(config: dict[str, Any], reused: bool = False) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a segfault must not write a core
    cap_mb = config.get("mem_cap_mb")
    # CUDA reserves terabytes of address space, so the address-space cap is CPU-only; on
    # GPU the parent's RSS polling is the cap.
    if cap_mb and not str(config.get("device", "cpu")).startswith("cuda"):
        with open("/proc/self/statm") as statm:
            size_bytes = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        limit = size_bytes + int(cap_mb) * 2**20
        # A process that serves several runs must raise the cap again for the next one:
        # only the soft limit (the parent's RSS polling still holds the hard line).
        hard = resource.getrlimit(resource.RLIMIT_AS)[1] if reused else limit
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _seed_everything(seed: int, device: str) -> None:
    import torch

    random.seed(seed)
    if device == "cpu":  # torch.manual_seed also queues seeding of every accelerator
        torch.default_generator.manual_seed(seed)
    else:
        torch.manual_seed(seed)
    try:
        import numpy

        numpy.random.seed(seed % 2**32)
    except ImportError:
        pass


def _run(config: dict[str, Any], source: str, outcome: dict[str, Any] | None = None) -> int:
    """One run. ``outcome`` (a process that may serve more runs): this run's status and
    peak memory are put there, and what the harness installed for it is removed."""
    if outcome is not None:
        from experiments.harness import reuse

        reuse.reset_peak_memory()  # the run's own peak, not the process's so far
    started = time.perf_counter()
    # CPU seconds (user+sys, all threads) of this process: the run's own cost, which the
    # load of a shared machine barely moves, unlike wall time (the ``slower`` label).
    cpu_started = time.process_time()
    # Only the end record written below carries it (the script cannot reach it by name).
    nonce = config.pop("nonce", None)
    run_dir = Path(config["run_dir"])
    _die_with_parent(int(config["parent_pid"]))
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGCHLD):
        signal.signal(number, signal.SIG_DFL)
    _redirect_output(run_dir)
    faulthandler.enable(file=sys.stderr, all_threads=True)
    # Imported before the address-space cap is measured: a fresh interpreter (the spawn
    # path) maps torch's libraries here, and that must not count against the run.
    import torch

    _limit_memory(config, reused=outcome is not None)

    from experiments.harness.hooks import SAMPLE_EVERY, Telemetry
    from experiments.harness.writer import TraceWriter

    torch.set_num_threads(int(config.get("threads", 1)))
    seed = int(config["seed"])
    _seed_everything(seed, str(config["device"]))
    if config.get("workdir"):
        os.chdir(config["workdir"])
    from experiments.harness.project import prepare

    project = prepare(config)  # write guard, reach probes, a mutated module's import hook

    tracecap.configure(config.get("trace_cap_bytes"))
    writer = TraceWriter(run_dir / TRACE_FILE, t0=started)
    writer.write_now(
        "start",
        pid=os.getpid(),
        device=config["device"],
        torch=str(torch.__version__),
        seed=seed,
        argv=list(config["argv"]),
    )
    telemetry = Telemetry(writer, sample_every=int(config.get("sample_every", SAMPLE_EVERY)))
    observed = bool(config.get("telemetry", True))
    if observed:
        telemetry.install()
        project.watch_evaluation(telemetry.forwards)  # changed lines run while evaluating
    # Numbers the script reports itself, logs or prints (experiments/capture): hooks
    # installed before it starts; report() goes through them to be tagged with its source.
    captured = reported.start(writer, config.get("metrics"), observe=observed)
    telemetry_api.set_sink(captured.report)
    # -- held-out evaluation (experiments/harness/holdout.py): capture the trained model --
    capture = None
    if config.get("holdout"):
        from experiments.harness import holdout

        capture = holdout.Capture()
        capture.install()

    raised: dict[str, Any] = {}  # the script's exception, read before its traceback goes

    def keep_raised(error: BaseException) -> None:
        try:  # an exception whose str() fails must still leave an end record
            raised["record"] = raised_record.describe(
                error, project.mutated_file or config["script"]
            )
        except Exception:
            raised["record"] = None

    def finish(error: BaseException | None) -> int:
        """Write the end record; returns the process's exit code."""
        telemetry_api.set_sink(None)
        project.stop_watching()
        counters: dict[str, Any] = {**telemetry.finish(), "telemetry": observed}
        # Before the held-out evaluation, whose forwards are the harness's (probes.py).
        witness = telemetry.witness_facts() if observed else None
        # Read before the held-out evaluation: its cost is the harness's, not the script's.
        cpu_s = round(time.process_time() - cpu_started, 4)
        # Before the held-out evaluation (whose output is not the script's): reads the
        # run's stdout/stderr and writes the resolved report records.
        captured.finish(run_dir)
        # -- held-out evaluation: only a script that ended normally has a trained model --
        if capture is not None and _exit_code(error) == 0:
            telemetry.remove()  # the evaluation's forwards and losses are not the run's
            fields = holdout.evaluate(capture, config["holdout"], seed, str(config["device"]))
            writer.write_now("holdout", **fields)
        status, exc_type, message = rules.after_exception(
            error, counters, writer.first_nonfinite is not None
        )
        exit_code = _exit_code(error)
        if outcome is not None:
            outcome["status"] = status
        writer.write_now(
            "end",
            status=status,
            exc_type=exc_type,
            exc_message=message,
            exit_code=exit_code,
            nonfinite=list(writer.first_nonfinite) if writer.first_nonfinite else None,
            peak_cuda_mb=telemetry.peak_cuda_mb,
            wall_s=round(time.perf_counter() - started, 4),
            cpu_s=cpu_s,
            reach=project.reach_counts(),
            reach_eval=project.reach_eval_counts(),
            raised=raised.get("record"),
            witness=witness,
            trace_dropped=tracecap.dropped(),
            nonce=nonce,
            **counters,
        )
        writer.close()
        sys.stdout.flush()
        sys.stderr.flush()
        return exit_code

    real_exit = os._exit
    this_process = os.getpid()

    def exit_now(code: int) -> NoReturn:
        # A script that leaves through os._exit still gets its end record, as if it
        # had called sys.exit (a forked data loader worker just exits).
        if os.getpid() == this_process:
            finish(OsExit(code))
        real_exit(code)

    os._exit = exit_now
    try:
        code = finish(
            _execute(
                config["script"], source, list(config["argv"]), project.compile_main, keep_raised
            )
        )
    finally:
        os._exit = real_exit
    if outcome is not None:  # the next run in this process must not see this one's hooks
        from experiments.harness import guard, reuse

        telemetry.close()
        if capture is not None:
            capture.remove()
        guard.uninstall()
        reported.stop(captured)
        outcome["peak_rss_mb"] = reuse.peak_memory_mb()
    return code


class OsExit(SystemExit):
    """How the end record names an ``os._exit(code)`` call by the script."""


def _exit_code(error: BaseException | None) -> int:
    if error is None:
        return 0
    if isinstance(error, SystemExit):
        if error.code is None:
            return 0
        return error.code if isinstance(error.code, int) else 1
    return 1


def _execute(
    script: str,
    source: str,
    argv: list[str],
    compile_main: Callable[[str, str], types.CodeType] | None = None,
    on_error: Callable[[BaseException], None] | None = None,
) -> BaseException | None:
    """Run ``source`` as ``__main__`` as if it were ``script``; the exception it ended with
    (``on_error`` sees it first, with its traceback)."""
    module = types.ModuleType("__main__")
    module.__dict__.update(
        __file__=script, __builtins__=builtins, __spec__=None, __loader__=None, __package__=None
    )
    sys.modules["__main__"] = module
    sys.argv = [script, *argv]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    # Tracebacks show the lines that ran (the mutant's), not the file on disk.
    linecache.cache[script] = (len(source), None, source.splitlines(keepends=True), script)
    try:
        code = (compile_main or _plain_compile)(source, script)
        exec(code, module.__dict__)
    except BaseException as error:
        if not (isinstance(error, SystemExit) and error.code in (0, None)):
            traceback.print_exc()
        if on_error is not None:
            on_error(error)
        error.__traceback__ = None  # let the script's tensors go before the end record
        module.__dict__.clear()
        gc.collect()
        return error
    return None


def _plain_compile(source: str, script: str) -> types.CodeType:
    return compile(source, script, "exec")


def main(argv: list[str] | None = None) -> NoReturn:
    """Fresh-interpreter entry: ``python -m experiments.harness.child RUN_DIR``."""
    args = sys.argv[1:] if argv is None else argv
    run_dir = Path(args[0])
    code = SETUP_FAILED
    try:
        config = json.loads((run_dir / SPEC_FILE).read_text(encoding="utf-8"))
        config["nonce"] = os.environ.pop(NONCE_ENV, None)
        reaper.become_subreaper()
        source = Path(config["source_path"]).read_text(encoding="utf-8")
        code = _run(config, source)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


if __name__ == "__main__":
    main()
