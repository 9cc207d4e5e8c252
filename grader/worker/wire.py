"""What crosses the boundary between a test and the code it grades: data, never objects.

A value is packed into JSON plus a list of binary blobs (arrays and tensors as `.npy` bytes).
Pickle is never used, and an incoming `.npy` blob is checked (dtype, shape, byte count) before
anything is allocated, so a hostile peer can neither run code nor make us allocate at will.

Tagged JSON: plain JSON types stand for themselves, a dict with str keys is a JSON object;
everything else is an object whose "$" key names its kind ("dict" for a dict that has a "$" key
of its own, "tuple", "float", "ndarray", "scalar", "tensor", "path", "bytes").
"""
from __future__ import annotations

import io
import json
import logging
import math
import os
import pathlib
import select
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

log = logging.getLogger(__name__)

# Sized to the course's real traffic (grading every reference, the largest message carries a
# 1.9 MB header and 0.8 MB of arrays) with a wide margin: each side reads what the other
# announces into memory, so these bound what a hostile worker can make the trusted side hold.
MAX_BLOB_BYTES = 32 << 20       # one array or tensor
MAX_MESSAGE_BYTES = 64 << 20    # everything in one message
MAX_HEADER_BYTES = 16 << 20     # the JSON part
_NUMERIC_KINDS = "biufc"        # bool, signed, unsigned, float, complex
_DEVICES = ("cuda", "mps")      # where a tensor other than a CPU one may be rebuilt
_LENGTH = struct.Struct(">Q")
WAIT_STEP_S = 0.25


class WireError(ValueError):
    """A value that is not data, or a message that breaks the protocol."""


class _NotData(WireError):
    """Raised at the offending leaf; containers on the way up prepend their index or key, so the
    path is only ever formatted for a value that fails."""

    def __init__(self, problem: str, path: str = ""):
        super().__init__(f"value{path} {problem}")
        self.problem, self.path = problem, path

    def within(self, step: str) -> _NotData:
        return _NotData(self.problem, step + self.path)


class ChannelClosed(EOFError):
    """The other side went away (the worker died or closed its pipe)."""


class ChannelTimeout(TimeoutError):
    """No complete message arrived before the deadline."""


# ---------------------------------------------------------------- values <-> tagged JSON + blobs

def pack(value) -> tuple[object, list[bytes]]:
    """`value` as tagged JSON and blobs; a value over the message limits is refused here, by its
    sender, with a reason, rather than by the receiver as a broken message."""
    blobs: list[bytes] = []
    packed = _pack(value, blobs)
    total = sum(len(b) for b in blobs)
    if total > MAX_MESSAGE_BYTES:
        raise WireError(f"value holds {total >> 20} MiB of arrays; at most {MAX_MESSAGE_BYTES >> 20} MiB "
                        "cross in one call")
    return packed, blobs


def unpack(obj, blobs: list[bytes]):
    """The value `pack` made of `obj` and `blobs`; anything else the other side could send is a
    WireError, whatever it trips over (a missing field, a wrong type, nesting too deep)."""
    try:
        return _unpack(obj, _Blobs(blobs))
    except WireError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as exc:
        raise WireError(f"malformed value: {type(exc).__name__}: {str(exc)[:80]}") from None


def roundtrip(value):
    """What the other side of a pipe would receive: the in-process backend uses it so both
    backends accept, copy and refuse exactly the same values."""
    return unpack(*pack(value))


def _pack(value, blobs):
    kind = type(value)
    if kind is str or kind is bool or kind is int or value is None:      # the common cases first
        return value
    if kind is float:
        return value if math.isfinite(value) else {"$": "float", "v": repr(value)}
    if kind is list:
        return _pack_items(value, blobs)
    if kind is dict:
        return _pack_dict(value, blobs)
    return _pack_other(value, blobs)


def _pack_items(values, blobs):
    packed = []
    for index, value in enumerate(values):
        try:
            packed.append(_pack(value, blobs))
        except _NotData as exc:
            raise exc.within(f"[{index}]") from None
    return packed


def _pack_dict(value, blobs):
    items = {}
    for key, item in value.items():
        if type(key) is not str:
            raise _NotData(f"has a key of type {type(key).__name__}; only str keys are data")
        try:
            items[key] = _pack(item, blobs)
        except _NotData as exc:
            raise exc.within(f"[{key!r}]") from None
    return {"$": "dict", "items": items} if "$" in items else items


def _pack_other(value, blobs):
    if isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return _pack(float(value), blobs)
    if isinstance(value, list):
        return _pack_items(value, blobs)
    if isinstance(value, tuple):
        return {"$": "tuple", "items": _pack_items(value, blobs)}
    if isinstance(value, dict):
        return _pack_dict(value, blobs)
    if isinstance(value, np.ndarray):
        return {"$": "ndarray", "blob": _add_blob(blobs, _npy_bytes(value))}
    if isinstance(value, np.generic):
        return {"$": "scalar", "blob": _add_blob(blobs, _npy_bytes(np.asarray(value)))}
    if isinstance(value, pathlib.PurePath):
        return {"$": "path", "v": str(value)}
    if isinstance(value, bytes):
        return {"$": "bytes", "blob": _add_blob(blobs, value)}
    if _is_tensor(value):
        return _pack_tensor(value, blobs)
    raise _NotData(
        f"is a {type(value).__module__}.{type(value).__qualname__}; graded functions take and "
        "return data only: numbers, strings, lists, tuples, dicts with str keys, NumPy arrays, "
        "torch tensors, paths")


def _unpack(obj, blobs):
    kind = type(obj)
    if kind is str or kind is int or kind is float or kind is bool or obj is None:
        return obj
    if kind is list:
        return [_unpack(v, blobs) for v in obj]
    if kind is not dict:
        raise WireError(f"malformed value: {str(obj)[:80]}")
    tag = obj.get("$")
    if tag is None:
        return {k: _unpack(v, blobs) for k, v in obj.items()}
    if tag == "dict":
        return {k: _unpack(v, blobs) for k, v in obj["items"].items()}
    if tag == "tuple":
        return tuple(_unpack(v, blobs) for v in obj["items"])
    if tag == "float":
        return float(obj["v"])
    if tag == "ndarray":
        return _npy_array(blobs.take(obj))
    if tag == "scalar":
        return _npy_array(blobs.take(obj))[()]
    if tag == "path":
        return pathlib.Path(obj["v"])
    if tag == "bytes":
        return bytes(blobs.take(obj))
    if tag == "tensor":
        return _unpack_tensor(obj, blobs)
    raise WireError(f"unknown value kind {tag!r}")


def _add_blob(blobs, data: bytes) -> int:
    if len(data) > MAX_BLOB_BYTES:
        raise _NotData(f"is {len(data) >> 20} MiB; one array may be at most {MAX_BLOB_BYTES >> 20} MiB")
    blobs.append(data)
    return len(blobs) - 1


class _Blobs:
    """The blobs of one message, each to be taken once: a value naming one blob many times would
    otherwise have the receiver copy it again for every mention (a 32 MiB array named 150 times
    made 5 GB of one message)."""

    def __init__(self, blobs: list[bytes]):
        self._blobs, self._taken = blobs, set[int]()

    def take(self, obj) -> bytes:
        index = obj.get("blob")
        if not isinstance(index, int) or not 0 <= index < len(self._blobs):
            raise WireError("value refers to a missing blob")
        if index in self._taken:
            raise WireError("value refers to one blob twice")
        self._taken.add(index)
        return self._blobs[index]


def _npy_bytes(array: np.ndarray) -> bytes:
    if array.dtype.kind not in _NUMERIC_KINDS or array.dtype.fields is not None:
        raise _NotData(f"is an array of dtype {array.dtype}; only bool and numeric arrays are data")
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _npy_array(data: bytes) -> np.ndarray:
    """Parse `.npy` bytes, refusing anything but a plain numeric array of the announced size."""
    stream = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(stream)
        read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                       (2, 0): np.lib.format.read_array_header_2_0}[version]
        shape, fortran_order, dtype = read_header(stream)
    except (ValueError, KeyError, OSError) as exc:
        raise WireError(f"malformed array: {exc}") from None
    if dtype.hasobject or dtype.kind not in _NUMERIC_KINDS or dtype.fields is not None:
        raise WireError(f"refused array of dtype {dtype}")
    if any(not isinstance(n, int) or n < 0 for n in shape):
        raise WireError(f"refused array of shape {shape}")
    count = math.prod(shape)
    if count * dtype.itemsize != len(data) - stream.tell():
        raise WireError(f"array of shape {shape} and dtype {dtype} does not match its byte count")
    flat = np.frombuffer(data, dtype=dtype, count=count, offset=stream.tell())
    return flat.reshape(shape, order="F" if fortran_order else "C").copy()


# torch is imported only when a tensor actually crosses, so NumPy-only workers start fast.

def _is_tensor(value) -> bool:
    torch = _torch_if_loaded()
    return torch is not None and isinstance(value, torch.Tensor)


def _torch_if_loaded():
    import sys
    return sys.modules.get("torch")


def _pack_tensor(tensor, blobs):
    import torch
    if tensor.layout != torch.strided or tensor.is_quantized:
        raise _NotData(f"is a {tensor.layout} tensor; only dense tensors are data")
    dtype = str(tensor.dtype).removeprefix("torch.")
    data = tensor.detach().to("cpu").contiguous()
    if tensor.dtype == torch.bfloat16:      # NumPy has no bfloat16: ship the raw 16 bits
        data = data.view(torch.int16)
    array = data.numpy()
    return {"$": "tensor", "dtype": dtype, "device": tensor.device.type,
            "blob": _add_blob(blobs, _npy_bytes(array))}


def _unpack_tensor(obj, blobs):
    import torch
    tensor = torch.from_numpy(_npy_array(blobs.take(obj)))
    dtype = getattr(torch, obj["dtype"], None)
    if not isinstance(dtype, torch.dtype):
        raise WireError(f"unknown tensor dtype {obj['dtype']!r}")
    if dtype == torch.bfloat16:
        tensor = tensor.view(torch.bfloat16)
    elif tensor.dtype != dtype:
        raise WireError(f"tensor announced as {dtype} arrived as {tensor.dtype}")
    device = obj["device"]
    if device != "cpu":
        if device not in _DEVICES:
            raise WireError(f"refused tensor device {str(device)[:20]!r}")
        try:
            tensor = tensor.to(device)
        except Exception as exc:         # noqa: BLE001 (no such device here: torch raises all sorts)
            raise WireError(f"a tensor on {device} cannot be made here ({type(exc).__name__})") from None
    return tensor


# ---------------------------------------------------------------- messages over a pair of pipes

def encode(header: dict, blobs: Sequence[bytes]) -> list[bytes]:
    """One message as the bytes to write. A message over the limits is refused here (WireError),
    before anything is written, so the receiving side never has to."""
    meta = json.dumps({"h": header, "blobs": [len(b) for b in blobs]}, allow_nan=False).encode()
    if len(meta) > MAX_HEADER_BYTES or any(len(b) > MAX_BLOB_BYTES for b in blobs) \
            or sum(map(len, blobs)) > MAX_MESSAGE_BYTES:
        raise WireError(f"the message is over the size limit ({MAX_MESSAGE_BYTES >> 20} MiB of arrays, "
                        f"{MAX_HEADER_BYTES >> 20} MiB of the rest)")
    return [_LENGTH.pack(len(meta)) + meta, *blobs]


@dataclass
class Allowance:
    """What messages may still announce, header and blobs: by default one message's limits. The
    trusted side gives one to each call, so that the questions a witnessed probe asks and its
    reply together carry no more than one reply could."""
    header_bytes: int = MAX_HEADER_BYTES
    blob_bytes: int = MAX_MESSAGE_BYTES


class Channel:
    """Length-prefixed messages over two file descriptors: a JSON header, then the blobs."""

    def __init__(self, read_fd: int, write_fd: int):
        self.read_fd = read_fd
        self.write_fd = write_fd

    def close(self) -> None:
        """Close both ends once (a second close could hit a reused descriptor number)."""
        for fd in (self.read_fd, self.write_fd):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError as exc:
                    log.debug("closing descriptor %d: %s", fd, exc)
        self.read_fd = self.write_fd = -1

    def send(self, header: dict, blobs: Sequence[bytes] = (), deadline: float | None = None) -> None:
        """Write one message. With a deadline (the trusted side, whose write end is non-blocking:
        a peer that stops reading must not hold it), past it is a ChannelTimeout."""
        for part in encode(header, blobs):
            self._write(part, deadline)

    def receive(self, deadline: float | None = None, while_waiting=None,
                allowance: Allowance | None = None) -> tuple[dict, list[bytes]]:
        """The next message. With a deadline, `while_waiting()` (which may raise) is called every
        WAIT_STEP_S that passes with nothing to read. With an allowance, what the message
        announces is also charged to it, and refused once it is spent."""
        allowance = allowance or Allowance()
        (size,) = _LENGTH.unpack(self._read(_LENGTH.size, deadline, while_waiting))
        if size > allowance.header_bytes:
            raise WireError(f"message header of {size} bytes is over the limit")
        allowance.header_bytes -= size
        try:
            meta = json.loads(self._read(size, deadline, while_waiting))
            header, sizes = meta["h"], meta["blobs"]
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            raise WireError(f"malformed message: {type(exc).__name__}: {str(exc)[:80]}") from None
        if not isinstance(header, dict) or not isinstance(sizes, list):
            raise WireError("malformed message: its header is not an object with a list of blob sizes")
        if any(not isinstance(n, int) or not 0 <= n <= MAX_BLOB_BYTES for n in sizes) \
                or sum(sizes) > allowance.blob_bytes:
            raise WireError("message announces blobs over the size limit")
        allowance.blob_bytes -= sum(sizes)
        return header, [self._read(n, deadline, while_waiting) for n in sizes]

    def _write(self, data: bytes, deadline: float | None) -> None:
        view = memoryview(data)
        while view:
            try:
                written = os.write(self.write_fd, view)
            except BlockingIOError:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise ChannelTimeout() from None
                select.select([], [self.write_fd], [], remaining)
                continue
            except OSError as exc:
                raise ChannelClosed(str(exc)) from None
            view = view[written:]

    def _read(self, n: int, deadline: float | None, while_waiting=None) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            if deadline is not None:
                remaining = deadline - time.monotonic()
                step = min(remaining, WAIT_STEP_S) if while_waiting else remaining
                ready, _, _ = select.select([self.read_fd], [], [], max(step, 0))
                if not ready:
                    if while_waiting is None or time.monotonic() >= deadline:
                        raise ChannelTimeout()
                    while_waiting()
                    continue
            chunk = os.read(self.read_fd, min(n - len(chunks), 1 << 20))
            if not chunk:
                raise ChannelClosed("the other side closed the channel")
            chunks += chunk
        return bytes(chunks)
