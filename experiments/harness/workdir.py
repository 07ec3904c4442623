"""Each run's private working directory: a lazy copy-on-write mirror of the invocation folder.

A user's script reads and writes paths relative to where it was started (``./data``,
``out/ckpt.pt``, ``model.pt``). A run must see the same paths, yet never write into the
user's tree or into another run's files. A full copy per run costs as much as the data
folder; an overlay filesystem needs privileges. The mirror here costs one symlink per
entry of the invocation folder (and of its parent, so ``../data`` works too):

    <tmp>/trainwreck-run-XXXX/          mirror of the invocation folder's parent
        <sibling> -> /home/me/<sibling>
        proj/                           the run's working directory
            data  -> /home/me/proj/data
            train.py -> /home/me/proj/train.py

Reads follow the symlinks. Writes are turned into private copies on the way
(``experiments.harness.guard``, an audit hook in the run's process): before the script
opens a mirrored file for writing, the symlink is replaced by a copy (or just removed
when the file is truncated anyway), and before it creates something inside a mirrored
folder, that folder becomes a real folder of symlinks, one level at a time. So
``out/ckpt.pt`` lands in the mirror, the user's ``out/`` never changes, and concurrent
runs each have their own. The parent removes the mirror when the run ends.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

PREFIX = "trainwreck-run-"


def create(invocation_dir: str | Path, exclude: Iterable[str | Path] = ()) -> Path:
    """A fresh mirror of ``invocation_dir``; returns the run's working directory in it.

    ``exclude`` (e.g. the results folder) is left out of the mirror, so a run never sees
    the harness's own files through a relative path.
    """
    source = Path(invocation_dir).resolve()
    skipped = {Path(path).resolve() for path in exclude}
    # The parent's pid in the name: a later sweep removes mirrors whose parent was killed.
    root = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
    try:
        workdir = root / (source.name or "root")
        if source.parent != source:
            _link_entries(source.parent, root, skipped | {source})
        workdir.mkdir()
        _link_entries(source, workdir, skipped)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return workdir


def root_of(workdir: str | Path) -> Path:
    """The mirror's top folder (what ``remove`` deletes) for a run's working directory."""
    return Path(workdir).parent


def remove(workdir: str | Path | None) -> None:
    """Delete a run's mirror. Only its own files go: symlinks are removed, never followed."""
    if not workdir:
        return
    root = root_of(workdir)
    if root.name.startswith(PREFIX):  # never anything but a mirror this module made
        shutil.rmtree(root, ignore_errors=True)


def remove_stale() -> int:
    """Remove mirrors left by sweeps that were killed (their parent process is gone)."""
    removed = 0
    for root in Path(tempfile.gettempdir()).glob(f"{PREFIX}*-*"):
        try:
            pid = int(root.name[len(PREFIX) :].split("-", 1)[0])
        except ValueError:
            continue
        if pid != os.getpid() and not _alive(pid):
            shutil.rmtree(root, ignore_errors=True)
            removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def mirrored_path(workdir: str | Path, invocation_dir: str | Path, path: str | Path) -> str:
    """Where ``path`` (a file of the user's project) appears inside the run's mirror; a
    path outside the invocation folder stays as it is."""
    try:
        relative = Path(path).resolve().relative_to(Path(invocation_dir).resolve())
    except ValueError:
        return str(path)
    return str(Path(workdir) / relative)


def place(workdir: str | Path, relative: str, text: str) -> Path:
    """Put ``text`` at ``relative`` in the mirror as a real file (a mutant in place of the
    user's file): each mirrored folder on the way becomes a real folder of symlinks first,
    so the user's file and folders are never written."""
    from experiments.harness.guard import _materialize_folder

    path = Path(workdir)
    for part in Path(relative).parts[:-1]:
        path = path / part
        if path.is_symlink():
            _materialize_folder(str(path))
    path = path / Path(relative).name
    if path.is_symlink():
        path.unlink()
    path.write_text(text, encoding="utf-8")
    return path


def _link_entries(source: Path, target: Path, skipped: set[Path]) -> None:
    try:
        entries = list(os.scandir(source))
    except OSError:  # an unreadable parent folder: the mirror just lacks its siblings
        return
    for entry in entries:
        path = Path(entry.path)
        if path in skipped or path.resolve() in skipped:
            continue
        os.symlink(entry.path, target / entry.name)
