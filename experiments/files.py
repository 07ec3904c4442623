"""Writing results so a reader (or a crash) never sees half of them.

Every file trainwreck writes for others to read goes through these: a temporary file in
the same folder renamed over the target, or a staging folder renamed into place.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

FILE_MODE = 0o644


def write_bytes_atomic(path: Path, data: bytes, *, fsync: bool = False) -> None:
    """Replace ``path`` by ``data`` in one rename; ``fsync`` when it must survive a crash."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            # mkstemp makes 0600 files: results are read by the group (shared folders)
            # and others, whatever the umask.
            os.fchmod(stream.fileno(), FILE_MODE)
            stream.write(data)
            if fsync:
                stream.flush()
                os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str, *, fsync: bool = False) -> None:
    write_bytes_atomic(path, text.encode("utf-8"), fsync=fsync)


def permission_message(error: PermissionError) -> str:
    """One line for a folder this user may not write (e.g. a results folder another
    user's job made): which path, and what would fix it."""
    path = error.filename or "a file"
    return (
        f"permission denied: {path}; write to a folder you own, or ask its owner to share "
        "it with your group (chmod -R g+rwX and umask 002 for the jobs that write it)"
    )


def check_new_folder(out: Path) -> None:
    """``out`` must not exist or be an empty folder (nothing of the user's is replaced)."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out} exists and is not an empty folder; choose a new folder")


@contextmanager
def staged_folder(out: Path) -> Iterator[Path]:
    """An empty folder beside ``out`` to fill; it becomes ``out`` when the block ends
    without error and is removed otherwise. ``out`` must not exist or be empty."""
    out = Path(out)
    check_new_folder(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        yield staging
        check_new_folder(out)  # again: filling the folder may have taken a while
        staging.chmod(0o755)
        staging.rename(out)  # replaces an empty folder; a non-empty one makes it fail
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
