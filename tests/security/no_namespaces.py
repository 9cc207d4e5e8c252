"""Run a command where no namespace can be made, as in a platform's container: a real seccomp
filter (libseccomp, through pyseccomp) that refuses what Docker's default profile refuses a root
without CAP_SYS_ADMIN: `unshare`, `setns`, `clone` with any CLONE_NEW* flag (EPERM), `clone3`
(ENOSYS, so that the C library falls back to `clone`), `mount`, `umount2` and `pivot_root`.
Everything the command starts inherits the filter.

    python tests/security/no_namespaces.py COMMAND [ARG ...]
"""
from __future__ import annotations

import errno
import os
import sys

CLONE_NEW_FLAGS = {"CLONE_NEWNS": 0x00020000, "CLONE_NEWCGROUP": 0x02000000, "CLONE_NEWUTS": 0x04000000,
                   "CLONE_NEWIPC": 0x08000000, "CLONE_NEWUSER": 0x10000000, "CLONE_NEWPID": 0x20000000,
                   "CLONE_NEWNET": 0x40000000}
REFUSED = ("unshare", "setns", "mount", "umount2", "pivot_root")


def unavailable() -> str | None:
    """Why the filter cannot be made here, or None."""
    if sys.platform != "linux":
        return "seccomp is Linux's"
    try:
        import pyseccomp
        pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
    except Exception as exc:           # not installed, or libseccomp missing
        return f"no seccomp filter can be made here: {type(exc).__name__}: {exc}"
    return None


def install() -> None:
    import pyseccomp as sc
    rules = sc.SyscallFilter(defaction=sc.ALLOW)
    for name in REFUSED:
        rules.add_rule(sc.ERRNO(errno.EPERM), name)
    for flag in CLONE_NEW_FLAGS.values():
        rules.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    rules.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    rules.load()


if __name__ == "__main__":
    install()
    os.execvp(sys.argv[1], sys.argv[1:])
