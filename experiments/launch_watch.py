"""A sweep whose launcher has started no job for ``launcher_wait_s`` says so, once, with
what it waits for (Ray: what each shard asks for against what is free; SLURM: the jobs'
states and squeue's reasons), and says again only when the first job starts.

A job has started when its Hydra output folder gets its ``.hydra/config.yaml`` (Hydra
writes it as the job begins), or, under Ray, when the job tells a small actor (a Ray
cluster's nodes need not share the sweep folder with the driver).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from experiments import launch_probe
from experiments.launch_fit import RAY

POLL_S = 2.0
RAY_OPTION = {"CPU": "num_cpus", "GPU": "num_gpus"}  # Ray's resource -> task option


class Watch:
    """A daemon thread: ``started()`` polled every ``poll_s``; after ``wait_s`` without a
    start, ``say(why())`` once; then one line when the first job starts."""

    def __init__(
        self,
        wait_s: float,
        started: Callable[[], bool],
        why: Callable[[], str],
        say: Callable[[str], None],
        poll_s: float = POLL_S,
    ) -> None:
        self.wait_s, self.started, self.why, self.say = wait_s, started, why, say
        self.poll_s = min(poll_s, max(wait_s / 4, 0.05))
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name="trainwreck-launch-watch", daemon=True
        )

    def start(self) -> Watch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.poll_s + 5)

    def _loop(self) -> None:
        begun = time.monotonic()
        said = False
        while not self._stop.wait(self.poll_s):
            if self._safely(self.started, False):
                if said:
                    self.say(f"the first job started after {time.monotonic() - begun:.0f} s")
                return
            if not said and time.monotonic() - begun >= self.wait_s:
                said = True
                reason = self._safely(self.why, "the launcher gave no reason")
                self.say(
                    f"no job has started after {self.wait_s:.0f} s (launcher_wait_s): {reason}"
                )

    @staticmethod
    def _safely(ask, fallback):
        try:
            return ask()
        except Exception:  # a probe that fails must not end the watch or the sweep
            return fallback


def job_folders_started(sweep_dir: Path, since: float) -> Callable[[], bool]:
    """Whether a job of this sweep has begun: Hydra wrote a job's config after ``since``
    (a rerun into the same sweep folder finds the older ones)."""

    def started() -> bool:
        # Job folders are <sweep>/<job number> by default; two levels cover a nested
        # hydra.sweep.subdir without walking a sweep folder set to a whole project.
        found = [*sweep_dir.glob("*/.hydra/config.yaml"), *sweep_dir.glob("*/*/.hydra/config.yaml")]
        for path in found:
            try:
                if path.stat().st_mtime >= since:
                    return True
            except OSError:
                continue
        return False

    return started


class Board:
    """A Ray actor (no CPU) that each shard tells when it starts."""

    def __init__(self) -> None:
        self.jobs: set[int] = set()

    def mark(self, job: int) -> None:
        self.jobs.add(job)

    def count(self) -> int:
        return len(self.jobs)


def create_board(name: str):
    import ray

    return ray.remote(num_cpus=0)(Board).options(name=name).remote()


def mark_started(name: str, job: int) -> None:
    """From inside a Ray task: tell the sweep's board that this job began."""
    import ray

    ray.get_actor(name).mark.remote(job)


def board_started(board) -> Callable[[], bool]:
    import ray

    return lambda: ray.get(board.count.remote(), timeout=10) > 0


def ray_why(asked: Mapping[str, float]) -> Callable[[], str]:
    """What the shards wait for: a node big enough (none is alive: only an autoscaler can
    add one) or free resources (other tasks hold them)."""

    def why() -> str:
        wants = ", ".join(f"{name} {amount:g}" for name, amount in asked.items())
        nodes = launch_probe.ray_nodes()
        largest = {
            name: max((node.get(name, 0.0) for node in nodes), default=0.0) for name in asked
        }
        short = [name for name, amount in asked.items() if largest[name] < amount]
        if short:
            have = ", ".join(f"{name} {amount:g}" for name, amount in largest.items())
            settings = " and ".join(f"{RAY}{RAY_OPTION.get(name, name)}" for name in short)
            return (
                f"each shard asks Ray for {wants}, and no live node has that much (largest: "
                f"{have}); it waits for a node that does, which only an autoscaler adds. "
                f"Lower {settings}, or leave launcher_fit on"
            )
        free, total = launch_probe.ray_resources()
        have = ", ".join(
            f"{name} {free.get(name, 0):g} of {total.get(name, 0):g}" for name in asked
        )
        return (
            f"each shard asks Ray for {wants}; free now: {have}. The shards wait until other "
            "tasks free that much on one node (`ray status` shows what runs)"
        )

    return why


def slurm_why(submitit_dir: Path) -> Callable[[], str]:
    def why() -> str:
        ids = _submitted_jobs(submitit_dir)
        states = launch_probe.squeue_states(ids)
        if not states:
            return (
                f"the jobs wait in SLURM's queue (squeue -u $USER shows them; {len(ids)} submitted)"
            )
        counts = ", ".join(f"{count} {state}" for state, count in states.most_common())
        return f"SLURM jobs: {counts} (squeue shows the queue)"

    return why


def _submitted_jobs(submitit_dir: Path) -> list[str]:
    """Job ids submitit wrote under its folder (``<id>_submitted.pkl``)."""
    found: Iterable[Path] = submitit_dir.glob("**/*_submitted.pkl") if submitit_dir.is_dir() else ()
    return sorted({path.name[: -len("_submitted.pkl")] for path in found})


def generic_why(launcher: str, sweep_dir: Path) -> Callable[[], str]:
    return lambda: f"the {launcher} launcher has begun no job (no job folder under {sweep_dir})"
