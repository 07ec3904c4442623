"""In the run's process: writes go to the run's mirror, never into the user's tree.

See ``experiments.harness.workdir`` for the mirror. An audit hook (``sys.addaudithook``,
which a script cannot remove) sees every Python-level write before it happens: ``open``
for writing, ``os.mkdir``, ``os.rename``/``os.replace``, ``os.remove``, ``os.rmdir``,
``os.truncate``, ``shutil.rmtree``... and ``torch.save`` to a path (its C++ writer opens
the file itself, so it is announced here as an ``open`` too). For each path inside the
mirror it first makes the path private (a mirrored folder on the way becomes a real folder
of symlinks; a mirrored file is copied, or unlinked when it is about to be truncated).
A write whose real path still lies in a protected folder (the invocation folder, the
script's folder) is refused with ``PermissionError``: the run fails loudly rather than
change the user's files. Native code that opens files itself (HDF5, a subprocess) is not
seen; ``docs/own-script.md`` says so.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable
from typing import Any

from experiments.harness.seal import KEY_FILE

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# event -> (positions of the paths it writes, position of its dir_fd argument or None,
# whether it follows a final symlink). Events that act on a link itself (remove, rename)
# are harmless on a mirrored symlink: only the folders on the way must be private.
_PATH_EVENTS: dict[str, tuple[tuple[int, ...], int | None, bool]] = {
    "os.mkdir": ((0,), 2, False),
    "os.rename": ((0, 1), 2, False),
    "os.remove": ((0,), 1, False),
    "os.rmdir": ((0,), 1, False),
    "os.link": ((1,), 2, False),
    "os.symlink": ((1,), 2, False),
    "os.mkfifo": ((0,), 2, False),
    "os.mknod": ((0,), 3, False),
    "os.truncate": ((0,), None, True),
    "os.chmod": ((0,), 2, True),
    "os.chown": ((0,), 3, True),
    "os.utime": ((0,), 3, True),
    "shutil.rmtree": ((0,), 1, True),
}


class Guard:
    """Copy-on-write for the mirror at ``workdir``; refuses writes into ``protected``."""

    def __init__(self, workdir: str, protected: Iterable[str], allowed: Iterable[str]) -> None:
        self.root = os.path.dirname(os.path.abspath(workdir))  # the mirror's top folder
        self.protected = tuple(os.path.realpath(path) for path in protected)
        self.allowed = tuple(os.path.realpath(path) for path in allowed)
        self.busy = False  # our own file operations raise audit events too

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if self.busy:
            return
        if event == "open":
            path, mode, flags = (*args, None, None, None)[:3]
            if isinstance(path, str | bytes | os.PathLike) and os.fsdecode(path).endswith(KEY_FILE):
                raise PermissionError("trainwreck: a run may not read the results' key")
            if not _writes(mode, flags):
                return
            truncate = (isinstance(mode, str) and "w" in mode) or bool(
                isinstance(flags, int) and flags & os.O_TRUNC
            )
            self._check(path, truncate)
            return
        spec = _PATH_EVENTS.get(event)
        if spec is None:
            return
        positions, dir_fd_at, follows = spec
        if dir_fd_at is not None and dir_fd_at < len(args):
            dir_fd = args[dir_fd_at]
            if isinstance(dir_fd, int) and dir_fd >= 0:
                return  # relative to an open folder, reached through a checked path
        for position in positions:
            if position < len(args):
                self._check(args[position], truncate=False, follows=follows)

    def _check(self, path: Any, truncate: bool, follows: bool = True) -> None:
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str | os.PathLike):
            return  # a file descriptor: opened before, checked then
        absolute = os.path.abspath(os.fspath(path))
        self.busy = True
        try:
            if absolute.startswith(self.root + os.sep):
                self._privatize(absolute, truncate, follows)
            if follows:
                real = os.path.realpath(absolute)
            else:  # the entry itself, in its real folder
                head, name = os.path.split(absolute)
                real = os.path.join(os.path.realpath(head), name)
        finally:
            self.busy = False
        if any(_inside(real, folder) for folder in self.allowed):
            return
        for folder in self.protected:
            if _inside(real, folder):
                raise PermissionError(
                    f"trainwreck: this run would write {real}, inside your project "
                    f"({folder}); runs write only into their private working directory "
                    f"(use a relative path)"
                )

    def _privatize(self, path: str, truncate: bool, follows: bool) -> None:
        """Make every mirrored folder on the way real; then the file itself private."""
        parts = os.path.relpath(path, self.root).split(os.sep)
        current = self.root
        for name in parts[:-1]:
            current = os.path.join(current, name)
            if os.path.islink(current):
                if not os.path.isdir(current):
                    return  # a file link used as a folder: the write fails as it would
                _materialize_folder(current)
            elif not os.path.isdir(current):
                return  # the rest does not exist yet: created inside the mirror
        if not follows or not os.path.islink(path):
            return
        if truncate or not os.path.exists(path):
            os.unlink(path)  # about to be replaced or emptied: no need to copy it
        elif os.path.isdir(path):
            _materialize_folder(path)
        else:
            target = os.path.realpath(path)
            os.unlink(path)
            shutil.copy2(target, path)


def _materialize_folder(link: str) -> None:
    """Replace a symlink to a folder by a real folder of symlinks to its entries."""
    target = os.path.realpath(link)
    os.unlink(link)
    os.mkdir(link)
    for entry in os.scandir(target):
        os.symlink(entry.path, os.path.join(link, entry.name))


def _writes(mode: Any, flags: Any) -> bool:
    if isinstance(mode, str):
        return any(letter in mode for letter in "wax+")
    return isinstance(flags, int) and bool(flags & _WRITE_FLAGS)


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


_active: Guard | None = None  # the current run's guard (a reused run process has several)
_hooked = False


def _dispatch(event: str, args: tuple[Any, ...]) -> None:
    if _active is not None:
        _active(event, args)


def install(workdir: str, protected: Iterable[str], allowed: Iterable[str]) -> Guard:
    """Guard the run from now on. Audit hooks cannot be removed, so one dispatcher is
    added per process and serves whichever run's guard is current (``uninstall``)."""
    global _active, _hooked
    guard = Guard(workdir, protected, allowed)
    _active = guard
    if not _hooked:
        sys.addaudithook(_dispatch)
        _hooked = True
    _announce_torch_save()
    return guard


def uninstall() -> None:
    """The run is over: its mirror is about to go, later events are not its writes."""
    global _active
    _active = None


def _announce_torch_save() -> None:
    """``torch.save(obj, path)`` opens ``path`` in C++, unseen by audit hooks: announce it."""
    try:
        import torch.serialization as serialization
    except ImportError:
        return
    opener = getattr(serialization, "_open_zipfile_writer", None)
    if opener is None or getattr(opener, "_trainwreck", False):
        return

    def announced(name_or_buffer: Any) -> Any:
        if isinstance(name_or_buffer, str | bytes | os.PathLike):
            sys.audit("open", name_or_buffer, "wb", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        return opener(name_or_buffer)

    announced._trainwreck = True  # type: ignore[attr-defined]
    serialization._open_zipfile_writer = announced
