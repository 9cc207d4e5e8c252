"""The wire format: data crosses, nothing else does, and a hostile blob is refused before
anything is allocated."""
import io
import math
import os
import pathlib
import time

import numpy as np
import pytest
import torch

from grader.worker import wire


@pytest.mark.parametrize("value", [
    None, True, 0, -7, 2**80, 1.5, "text", [1, [2, 3]], (1, "a"), {"a": {"b": (1, 2)}},
    pathlib.Path("/tmp/x.json"), b"\x00\x01",
])
def test_plain_values_round_trip(value):
    assert wire.roundtrip(value) == value
    assert type(wire.roundtrip(value)) is type(value)


def test_non_finite_floats_round_trip_through_strict_json():
    got = wire.roundtrip([math.inf, -math.inf, math.nan])
    assert got[0] == math.inf and got[1] == -math.inf and math.isnan(got[2])


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int64", "float16", "float32", "float64", "complex128"])
def test_arrays_keep_dtype_shape_and_values(dtype):
    array = (np.arange(24).reshape(2, 3, 4) % 5).astype(dtype)
    got = wire.roundtrip(array)
    assert got.dtype == array.dtype and got.shape == array.shape and np.array_equal(got, array)
    assert got.flags.writeable


def test_fortran_ordered_and_strided_arrays():
    array = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    assert np.array_equal(wire.roundtrip(array), array)
    assert np.array_equal(wire.roundtrip(array[:, ::2]), array[:, ::2])


def test_numpy_scalars_stay_numpy_scalars():
    got = wire.roundtrip(np.float32(2.5))
    assert isinstance(got, np.float32) and got == np.float32(2.5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64, torch.bool])
def test_tensors_keep_dtype_and_bits(dtype):
    tensor = torch.randn(3, 5).mul(100).to(dtype)
    got = wire.roundtrip(tensor)
    assert isinstance(got, torch.Tensor) and got.dtype == dtype and torch.equal(got, tensor)


def test_parameters_cross_as_plain_tensors_without_graph():
    parameter = torch.nn.Parameter(torch.ones(2))
    got = wire.roundtrip({"w": parameter})["w"]
    assert type(got) is torch.Tensor and not got.requires_grad


@pytest.mark.parametrize("value,where", [
    (object(), "value"),
    ({"ok": [1, {2: 3}]}, "value['ok'][1]"),
    ({1, 2}, "value"),
    (np.array([object()]), "value"),
    (np.zeros(2, dtype=[("a", "f4")]), "value"),
    (np.array(["a", "b"]), "value"),
    ([lambda: 0], "value[0]"),
])
def test_non_data_is_refused_with_its_location(value, where):
    with pytest.raises(wire.WireError, match=r"^" + __import__("re").escape(where)):
        wire.pack(value)


def _npy_header(dtype_descr: str, shape: tuple) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": dtype_descr, "fortran_order": False, "shape": shape})
    return buffer.getvalue()


def test_object_array_blob_is_refused_before_loading():
    blob = _npy_header("|O", (1,)) + b"\x80\x04N."           # a pickle would follow
    with pytest.raises(wire.WireError, match="dtype"):
        wire.unpack({"$": "ndarray", "blob": 0}, [blob])


def test_blob_announcing_more_data_than_it_has_is_refused():
    blob = _npy_header("<f8", (10**12,)) + b"\x00" * 8        # claims 8 TB, carries 8 bytes
    with pytest.raises(wire.WireError, match="byte count"):
        wire.unpack({"$": "ndarray", "blob": 0}, [blob])


def test_missing_blob_and_unknown_kind_are_refused():
    with pytest.raises(wire.WireError):
        wire.unpack({"$": "ndarray", "blob": 3}, [])
    with pytest.raises(wire.WireError):
        wire.unpack({"$": "pickle", "v": "..."}, [])


@pytest.mark.parametrize("value, blobs", [
    ({"$": "ndarray", "blob": 0}, [_npy_header("<f8", (-2, -2)) + b"\x00" * 32]),     # -2 x -2 "holds" 4 values
    ({"$": "tuple"}, []),
    ({"$": "float", "v": [1]}, []),
    ({"$": "dict", "items": 3}, []),
    (__import__("functools").reduce(lambda inner, _: [inner], range(100_000), 0), []),
    ([{"$": "ndarray", "blob": 0}] * 2, wire.pack(np.zeros(4))[1]),       # one array, named twice, copied twice
    ({**wire.pack(torch.zeros(2))[0], "device": "meta"}, wire.pack(torch.zeros(2))[1]),
    ({**wire.pack(torch.zeros(2))[0], "device": ["cuda"]}, wire.pack(torch.zeros(2))[1]),
])
def test_every_malformed_value_is_a_wire_error(value, blobs):
    """What the other side sends is data to check, never a reason for the reader to fail in
    some other way: each of these is refused as malformed."""
    with pytest.raises(wire.WireError):
        wire.unpack(value, blobs)


@pytest.mark.parametrize("meta", [b"[" * 100_000 + b"]" * 100_000, b'["h", "blobs"]', b'{"h": 1, "blobs": []}',
                                  b'{"h": {}, "blobs": 7}'])
def test_every_malformed_message_is_a_wire_error(meta):
    channel, r, w = _pipe_channel()
    os.write(w, len(meta).to_bytes(8, "big"))
    writer = __import__("threading").Thread(target=os.write, args=(w, meta))
    writer.start()
    with pytest.raises(wire.WireError):
        channel.receive(time.monotonic() + 5)
    writer.join()


def _pipe_channel():
    r, w = os.pipe()
    return wire.Channel(r, w), r, w


def test_channel_round_trip_with_blobs():
    channel, _, _ = _pipe_channel()
    value, blobs = wire.pack({"x": np.arange(5.0)})
    channel.send({"value": value}, blobs)
    header, received = channel.receive(time.monotonic() + 5)
    assert np.array_equal(wire.unpack(header["value"], received)["x"], np.arange(5.0))


def test_channel_times_out_and_reports_closed_peers():
    channel, r, w = _pipe_channel()
    with pytest.raises(wire.ChannelTimeout):
        channel.receive(time.monotonic() + 0.2)
    os.close(w)
    with pytest.raises(wire.ChannelClosed):
        channel.receive(time.monotonic() + 1)


def test_channel_refuses_oversized_headers():
    channel, r, w = _pipe_channel()
    os.write(w, (wire.MAX_HEADER_BYTES + 1).to_bytes(8, "big"))
    with pytest.raises(wire.WireError, match="over the limit"):
        channel.receive(time.monotonic() + 1)


def test_an_allowance_is_charged_across_messages():
    """A call's questions and its reply share one message's limits: what one message leaves of
    the allowance is all the next may announce."""
    channel, _, _ = _pipe_channel()
    allowance = wire.Allowance(header_bytes=200, blob_bytes=100)
    channel.send({"ask": "x"}, [b"\0" * 60])
    channel.receive(time.monotonic() + 5, allowance=allowance)
    channel.send({"ok": True}, [b"\0" * 60])
    with pytest.raises(wire.WireError, match="over the size limit"):
        channel.receive(time.monotonic() + 5, allowance=allowance)


def test_a_write_the_peer_does_not_read_times_out():
    channel, _, _ = _pipe_channel()
    os.set_blocking(channel.write_fd, False)
    with pytest.raises(wire.ChannelTimeout):
        channel.send({"fill": "the pipe"}, [b"\0" * (8 << 20)], deadline=time.monotonic() + 0.5)
