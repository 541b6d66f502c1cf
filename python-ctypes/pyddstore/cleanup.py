"""Removes node-local segments that killed processes left behind.

    python -m pyddstore.cleanup [--dry-run] [DIR ...]

A rank killed (``kill -9``, an out-of-memory kill, a node's job being
cancelled) while it registered a variable with node-local reads on can leave
its segment ``ddstore.<pid>.<n>`` in ``/dev/shm`` (or ``DDSTORE_SHM_DIR``).
The next ``dds_create`` on the node removes such files by itself; this
command does the same by hand, with the same rule: a file is removed only
when it is a regular file named ``ddstore.<pid>.<n>``, owned by the user
running the command, and no process ``<pid>`` exists (``kill(pid, 0)``
fails with ESRCH). Another user's files, and those of live processes, stay.
Run it on the node that holds them, in the same pid namespace as the jobs
(a container's processes are invisible from outside it). Without DIR it
cleans ``$DDSTORE_SHM_DIR`` (if set) and ``/dev/shm``. Needs neither MPI
nor libddstore. Prints each file removed (or that would be, with
--dry-run); exits 0.
"""

import errno
import os
import re
import stat
import sys

_NAME = re.compile(r"ddstore\.([0-9]+)\.([0-9]+)")


def _gone(pid):
    try:
        os.kill(pid, 0)
    except OSError as e:
        return e.errno == errno.ESRCH
    return False


def stale(directory):
    """The paths in `directory` that the rule above would remove."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    found = []
    for name in sorted(names):
        m = _NAME.fullmatch(name)
        if not m:
            continue
        pid = int(m.group(1))
        if pid <= 0 or pid == os.getpid():
            continue
        path = os.path.join(directory, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and _gone(pid):
            found.append(path)
    return found


def clean(directories, dry_run=False):
    """Removes (or, with dry_run, lists) the stale segments; returns their paths."""
    done = []
    for d in directories:
        for path in stale(d):
            if not dry_run:
                try:
                    os.unlink(path)
                except OSError:
                    continue
            done.append(path)
    return done


def main(argv=None):
    args = list(sys.argv[1:] if argv is None else argv)
    dry = "--dry-run" in args
    dirs = [a for a in args if a != "--dry-run"]
    if any(a.startswith("-") for a in dirs):
        print(__doc__, file=sys.stderr)
        return 2
    if not dirs:
        dirs = [d for d in (os.environ.get("DDSTORE_SHM_DIR"), "/dev/shm") if d]
        dirs = list(dict.fromkeys(dirs))
    for path in clean(dirs, dry):
        print(("would remove " if dry else "removed ") + path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
