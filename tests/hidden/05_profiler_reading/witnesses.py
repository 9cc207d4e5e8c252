"""Witnesses of the hidden suite of exercise 05: what the learner's time_ms times runs here, in
the test's process, where the learner's code cannot reach it.

A probe hands time_ms callables that ask a witness (`submission.probe(..., witness=...)`); the
witness does each call's work, counts the calls and times them on its own clock, and the tests
judge time_ms's answer by what the witness saw. Nothing the learner's process measures or
reports about the calls is believed.
"""
import time

MAX_CALLS = 200         # a time_ms that loops on: refused past this many calls


def _count(calls: int) -> int:
    if calls >= MAX_CALLS:
        raise RuntimeError(f"fn was called more than {MAX_CALLS} times")
    return calls + 1


class Sleeper:
    """A function that sleeps `first_ms` on its `first_calls` first calls (the one-time costs of
    a first call), `outlier_ms` on call number `outlier_call` (from 1) and `then_ms` otherwise,
    and times each of its calls: a timing around a call is never shorter than the call."""

    QUESTIONS = ("call",)

    def __init__(self, first_ms: float, first_calls: int, then_ms: float,
                 outlier_call: int | None = None, outlier_ms: float | None = None):
        self.first_ms, self.first_calls, self.then_ms = first_ms, first_calls, then_ms
        self.outlier_call, self.outlier_ms = outlier_call, outlier_ms
        self.durations_ms: list[float] = []

    @property
    def calls(self) -> int:
        return len(self.durations_ms)

    def call(self) -> None:
        call = _count(self.calls)
        ms = self.outlier_ms if call == self.outlier_call else self.first_ms if call <= self.first_calls \
            else self.then_ms
        begin = time.perf_counter()
        time.sleep(ms / 1000.0)
        self.durations_ms.append((time.perf_counter() - begin) * 1000.0)


class SimulatedDevice:
    """A CUDA device for a machine without one. `enqueue` (the timed function) queues `work_ms`
    of device work and returns at once; the work runs later, in order, on the device's clock.
    The probe's stand-ins for torch.cuda's synchronize, streams and events ask the rest: an
    event recorded after queued work is reached when that work is done."""

    QUESTIONS = ("enqueue", "synchronize", "query", "record", "event_synchronize", "event_query", "elapsed_ms")

    def __init__(self, work_ms: float = 0.0):
        self.work_s = work_ms / 1000.0
        self.free_at = time.perf_counter()
        self.calls = 0
        self.events: list[float] = []

    def enqueue(self) -> None:
        self.calls = _count(self.calls)
        self.free_at = max(self.free_at, time.perf_counter()) + self.work_s

    def synchronize(self) -> None:
        time.sleep(max(0.0, self.free_at - time.perf_counter()))

    def query(self) -> bool:
        return time.perf_counter() >= self.free_at

    def record(self) -> int:
        """A new event, reached once the work queued so far is done; its number."""
        if len(self.events) >= 4 * MAX_CALLS:
            raise RuntimeError(f"more than {4 * MAX_CALLS} events were recorded")
        self.events.append(max(time.perf_counter(), self.free_at))
        return len(self.events) - 1

    def event_synchronize(self, event: int) -> None:
        time.sleep(max(0.0, self._reached_at(event) - time.perf_counter()))

    def event_query(self, event: int) -> bool:
        return time.perf_counter() >= self._reached_at(event)

    def elapsed_ms(self, start: int, end: int) -> float:
        if not self.event_query(end):
            raise RuntimeError("CUDA error: device not ready")      # as cudaEventElapsedTime
        return (self._reached_at(end) - self._reached_at(start)) * 1000.0

    def _reached_at(self, event) -> float:
        if not (type(event) is int and 0 <= event < len(self.events)):
            raise RuntimeError("CUDA error: invalid resource handle (the event was never recorded)")
        return self.events[event]
