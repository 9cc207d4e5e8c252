"""The ranks of a process group, forked beside the learner's code: what a probe of a distributed
exercise runs, as `torchrun --standalone --nproc-per-node N` would start them.

`run_ranks(world_size, work, *args, limit_s=...)` forks `world_size` processes from the calling
one (in a grading, the worker: the libraries it imported are shared, not imported again), gives
each torchrun's environment and calls `work(rank, *args)` in it. It returns one `RankOutcome` per
rank: what the rank returned, what it raised, that it died, or that it was still running when the
limit came. Ranks still running then are killed, so a rank that waits forever in a collective for
a rank that failed costs the probe its limit, never the grading.

The rendezvous is torchrun's: this process hosts the store, as torchrun's agent does, on a port the
system picks and this process holds until the ranks have ended, and every rank connects to it
(TORCHELASTIC_USE_AGENT_STORE). No fixed port, and no port that another grading on the same host
could take between its choice and its use. Where learner code may open no socket (the uid level's
seccomp filter), no process group can be made: `run_ranks` raises `NoSockets` before forking, with
a sentence saying so.

Like `loading`, this module imports nothing at import time beyond the standard library: torch's
store is imported when ranks are run, and torch is only told to compute on one thread per rank
(torchrun sets OMP_NUM_THREADS=1 for the same reason: ranks sharing a machine's cores).
"""
from __future__ import annotations

import os
import pickle
import selectors
import signal
import socket
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from typing import Any, Literal

from grader.worker.zygote import die_with_parent

State = Literal["returned", "raised", "died", "stopped"]
RESULT_LIMIT_BYTES = 16 << 20        # what one rank may hand back (pickled)
ERROR_CHARS = 600                    # of a rank's exception message, in its outcome
LENGTH_BYTES = 8                     # each result is preceded by its length, so it is whole once read
LOCALHOST = "127.0.0.1"


class NoSockets(RuntimeError):
    """This process may open no socket, so ranks here could never form a process group."""


@dataclass(frozen=True)
class RankOutcome:
    rank: int
    state: State          # returned, raised (an exception), died (exited without a word) or stopped at the limit
    value: Any = None     # what `work` returned (state "returned")
    error: str = ""       # "Type: message" (raised), the exit status or signal (died), the limit (stopped)
    trace: str = ""       # the traceback of what it raised, innermost frames last

    def as_data(self) -> dict:
        """The outcome as a probe hands it to the test (plain data)."""
        return asdict(self)

    def describe(self) -> str:
        """One line about this rank, as a test's message names it."""
        return {"returned": f"rank {self.rank} returned",
                "raised": f"rank {self.rank} raised {self.error}",
                "died": f"rank {self.rank} died ({self.error}) without a result",
                "stopped": f"rank {self.rank} was still running {self.error} and was stopped (waiting in a collective "
                           "for a rank that never joined it, or in a loop)"}[self.state]


def describe_failures(outcomes: list[RankOutcome]) -> str:
    """The ranks that did not return, one sentence each ("" when every rank returned)."""
    return "; ".join(outcome.describe() for outcome in outcomes if outcome.state != "returned")


def torchrun_environment(rank: int, world_size: int, port: int, per_node: int) -> dict[str, str]:
    """What `torchrun --nnodes world_size/per_node --nproc-per-node per_node` gives each of its
    processes: LOCAL_RANK counts within a machine, GROUP_RANK names the machine, and the store its
    agent hosts."""
    return {"RANK": str(rank), "LOCAL_RANK": str(rank % per_node), "GROUP_RANK": str(rank // per_node),
            "WORLD_SIZE": str(world_size), "LOCAL_WORLD_SIZE": str(per_node), "MASTER_ADDR": LOCALHOST,
            "MASTER_PORT": str(port), "TORCHELASTIC_USE_AGENT_STORE": "True", "OMP_NUM_THREADS": "1"}


def refuse_without_sockets() -> None:
    """`NoSockets` where this process may open no socket, before any rank is forked."""
    try:
        socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
    except PermissionError as exc:
        raise NoSockets("this grading gives learner code no sockets (the uid level refuses them), and the ranks of a "
                        f"process group talk over sockets: they cannot run here ({exc})") from None


def agent_store(world_size: int):
    """The rendezvous store torchrun's agent would host, listening on a port the system picks. Its
    server is a thread: it is made after the ranks are forked, which a thread's locks must not reach."""
    from torch.distributed import TCPStore
    return TCPStore(LOCALHOST, 0, world_size, is_master=True, wait_for_workers=False)


def run_ranks(world_size: int, work, *args, limit_s: float, per_node: int | None = None) -> list[RankOutcome]:
    """`work(rank, *args)` in each of `world_size` forked ranks; every rank's outcome, in rank order,
    once all have ended or `limit_s` seconds have passed (those still running are then killed).
    `per_node` ranks make one machine in their environment (all of them by default): code that takes
    LOCAL_RANK for the rank is caught where there are two machines."""
    per_node = per_node or world_size
    if world_size < 1 or world_size % per_node:
        raise ValueError(f"world_size must be a positive multiple of per_node, not {world_size} (per_node {per_node})")
    refuse_without_sockets()
    sys.stdout.flush()
    sys.stderr.flush()
    children: dict[int, tuple[int, int]] = {}       # read end -> (rank, pid)
    ports: list[int] = []                            # where each rank is told the store's port
    parent, store = os.getpid(), None
    try:
        for rank in range(world_size):
            read_end, write_end = os.pipe()
            port_read, port_write = os.pipe()
            pid = os.fork()
            if pid == 0:                             # the rank: never returns
                os.close(read_end)
                os.close(port_write)
                _serve_rank(write_end, port_read, parent, rank, (world_size, per_node), work, args)
            os.close(write_end)
            os.close(port_read)
            children[read_end] = (rank, pid)
            ports.append(port_write)
        store = agent_store(world_size)
        for port_write in ports:
            os.write(port_write, str(store.port).encode())
        received = _read_until(children, time.monotonic() + limit_s)
    finally:
        for pid in (pid for _, pid in children.values()):
            _kill(pid)
        for end in [*children, *ports]:
            os.close(end)
        del store                                    # its port is free again
    return [_outcome(rank, pid, received.get(read_end), limit_s)
            for read_end, (rank, pid) in sorted(children.items(), key=lambda item: item[1][0])]


def _serve_rank(write_end: int, port_read: int, parent: int, rank: int, layout: tuple[int, int], work, args) -> None:
    """In the forked rank: learn the store's port, run the work, hand its result (or what it
    raised) back, and exit. It dies with the process that forked it (the worker, when the trusted
    side kills that)."""
    status = 0
    try:
        die_with_parent(parent)
        signal.signal(signal.SIGUSR2, signal.SIG_DFL)      # the worker's stack dumps are the worker's own
        port = int(os.read(port_read, 16) or b"0")
        if not port:                                       # the store was never made: nothing to join
            os._exit(71)
        world_size, per_node = layout
        os.environ.update(torchrun_environment(rank, world_size, port, per_node))
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.set_num_threads(1)
        try:
            message = ("returned", work(rank, *args), "", "")
        except BaseException as exc:                     # SystemExit too: the rank says what ended it
            message = ("raised", None, f"{type(exc).__name__}: {str(exc)[:ERROR_CHARS]}",
                       "".join(traceback.format_exception(exc))[-4 * ERROR_CHARS:])
        try:
            framed = _framed(message)
        except Exception as exc:                         # noqa: BLE001 (a value that does not pickle is the rank's answer)
            framed = _framed(("raised", None, f"{type(exc).__name__}: its result could not be handed back ({exc})", ""))
        with os.fdopen(write_end, "wb") as out:
            out.write(framed)
    except BaseException:                                # noqa: BLE001 (a rank never returns into the caller's code)
        status = 70
    finally:
        os._exit(status)


def _read_until(children: dict[int, tuple[int, int]], deadline: float) -> dict[int, bytes]:
    """Every rank's result, read as it comes (a large one never blocks its rank), until each rank
    has handed back a whole result or closed its pipe, or the deadline passes. A result is whole
    when its length says so: a process the rank forked (a DataLoader's worker) may hold the pipe
    open after the rank has answered."""
    received = {read_end: bytearray() for read_end in children}
    with selectors.DefaultSelector() as selector:
        for read_end in children:
            selector.register(read_end, selectors.EVENT_READ)
        open_ends = set(children)
        while open_ends and (left := deadline - time.monotonic()) > 0:
            for key, _ in selector.select(timeout=left):
                chunk = os.read(key.fd, 1 << 16)
                received[key.fd] += chunk
                if chunk and _oversize(received[key.fd]):
                    received[key.fd] = _framed(("died", None, f"killed: its result passed {RESULT_LIMIT_BYTES >> 20} MiB", ""))
                    _kill(children[key.fd][1])
                elif chunk and not _whole(received[key.fd]):
                    continue
                selector.unregister(key.fd)
                open_ends.discard(key.fd)
    return {read_end: bytes(data) for read_end, data in received.items() if read_end not in open_ends}


def _framed(message: tuple) -> bytearray:
    payload = pickle.dumps(message)
    return bytearray(len(payload).to_bytes(LENGTH_BYTES, "big") + payload)


def _declared_length(data: bytearray) -> int:
    return int.from_bytes(data[:LENGTH_BYTES], "big") if len(data) >= LENGTH_BYTES else 0


def _oversize(data: bytearray) -> bool:
    return max(_declared_length(data), len(data) - LENGTH_BYTES) > RESULT_LIMIT_BYTES


def _whole(data: bytearray) -> bool:
    return len(data) >= LENGTH_BYTES + _declared_length(data) > LENGTH_BYTES


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _outcome(rank: int, pid: int, data: bytes | None, limit_s: float) -> RankOutcome:
    _, status = os.waitpid(pid, 0)
    if data is None:
        return RankOutcome(rank, "stopped", error=f"after the limit of {limit_s:g} s")
    if not _whole(bytearray(data)):                # nothing, or cut short by its death
        return RankOutcome(rank, "died", error=_exit_text(status))
    state, value, error, trace = pickle.loads(data[LENGTH_BYTES:LENGTH_BYTES + _declared_length(bytearray(data))])
    return RankOutcome(rank, state, value=value, error=error, trace=trace)


def _exit_text(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"
