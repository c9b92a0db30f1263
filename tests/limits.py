"""Limits on a call: how much memory it may take and how long it may run, so that a giant allocation or a hang
fails its test instead of the machine.

A refusal costs nothing; what it refuses could cost terabytes, or run until
memory runs out.  :func:`at_most` lowers the process's address space
(``RLIMIT_AS``) to what it uses plus a margin, and sets an alarm: inside the
block, an allocation beyond the margin fails at once (``MemoryError``,
PyTorch's ``RuntimeError``) and a call that runs past the time raises
:class:`TimeoutError`, neither of which a test of a refusal accepts.
"""

from __future__ import annotations

import os
import resource
import signal
from collections.abc import Iterator
from contextlib import contextmanager


def address_space() -> int:
    """The bytes of address space this process maps now (``/proc/self/statm``'s first field)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def resident() -> int:
    """The bytes of memory this process holds now (``/proc/self/statm``'s second field)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@contextmanager
def at_most(extra_bytes: int = 2 * 2**30, seconds: float = 20.0) -> Iterator[None]:
    """Inside the block, at most ``extra_bytes`` more address space and ``seconds`` of time (then a TimeoutError)."""

    def too_long(signum, frame):
        raise TimeoutError(f"the call ran for more than {seconds} s")

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = address_space() + extra_bytes
    resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
    previous = signal.signal(signal.SIGALRM, too_long)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
