"""One writer per run directory: an OS lock (``flock``) on ``DIR/.lock``, held for the life
of a run, fresh or resumed.

The kernel releases the lock when its holder dies, however it dies, so a lock file left by a
killed run does not block a resume. The file holds the holder's pid, for the refusal to name.
It is removed on release; whoever locks it checks that the path still names the file it
locked (another holder may have removed it meanwhile) and tries again if not."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path

from hpt.results.rundir import SAMPLES, SPEC, SUMMARY, RunDirError

LOCK = ".lock"
# What a run writes in its directory, besides the lock (hpt.results.store, the runner's resume).
WRITTEN = (SAMPLES, SPEC, SUMMARY, f"{SAMPLES}.resume", f"{SPEC}.tmp", f"{SUMMARY}.tmp")


class RunLock:
    """The lock of a run directory, held from ``take`` to ``release``."""

    def __init__(self, directory: Path, fd: int, created: list[Path]) -> None:
        self.directory = directory
        self._fd: int | None = fd
        # The directories this run made (the run directory first, then any parents), removed
        # again if nothing was written to them.
        self._created = created

    @classmethod
    def take(cls, directory: Path) -> RunLock:
        """Lock ``directory`` (made if missing), or refuse naming the process that holds it."""
        created = [d for d in (directory, *directory.parents) if not d.exists()]
        try:
            while True:
                # In the loop: a holder that just released may have removed the directory.
                directory.mkdir(parents=True, exist_ok=True)
                # Never through a link: a run directory received from someone else could
                # name any of the user's files as its lock, to be truncated and written.
                fd = os.open(
                    directory / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644
                )
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    raise RunDirError(
                        f"{directory} is being written by another hpt process "
                        f"({_holder(directory)}); wait for it to end, or stop it, before "
                        f"running or resuming into it"
                    ) from None
                if _same_file(fd, directory / LOCK):
                    break
                os.close(fd)  # locked a file its last holder had just removed
            _refuse_links(directory)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise RunDirError(
                    f"{directory / LOCK} is a symbolic link; a run directory's own files must "
                    f"not point elsewhere (remove it, or copy the run's files to a new folder)"
                ) from None
            raise RunDirError(
                f"cannot write run directory {directory}: {exc.strerror or exc}; a run "
                f"writes to its directory as it goes (choose a writable --out; to resume a "
                f"read-only run, copy it somewhere writable and resume the copy)"
            ) from None
        # The pid is only for a refusal to name: a full disk that cannot take it is not this
        # lock's failure (the run's first write reports it).
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        return cls(directory, fd, created)

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self.directory / LOCK)  # before unlocking: see the module's docstring
        os.close(fd)
        with contextlib.suppress(OSError):  # only while empty: a failed start leaves nothing
            for made in self._created:
                made.rmdir()


def _refuse_links(directory: Path) -> None:
    """Refuse a run directory whose files hpt writes are symbolic links: writing through one
    would change a file outside the run (a directory received from someone else can hold
    ``samples.jsonl -> ~/.bashrc``)."""
    for name in WRITTEN:
        if (directory / name).is_symlink():
            raise RunDirError(
                f"{directory / name} is a symbolic link; a run directory's own files must not "
                f"point elsewhere (copy the file it names into the run, or start a new run)"
            )


def _same_file(fd: int, path: Path) -> bool:
    try:
        named = path.stat()
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def _holder(directory: Path) -> str:
    try:
        pid = (directory / LOCK).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        pid = ""
    return f"pid {pid}" if pid.isdigit() else "pid unknown"
