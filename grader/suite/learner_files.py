"""Reading back what learner code wrote: logs, run records, figures, adapters.

A test reads these files in the grading's own process, which the workers' limits do not cover,
so every reader here bounds its work before it allocates:
- the path must lie inside the folder the test gave the learner's code (`learner_path`), and a
  file is read only up to a byte limit (`learner_file`);
- JSON is read from at most JSON_BYTES, which bounds the values it builds (a mebibyte of `[{},`
  builds about 30 MB of dicts);
- a PNG is decoded only once the size its decoder will use is known to be within a pixel limit
  (`learner_png`);
- a safetensors file is loaded only once its header is known to be small and to list few tensors
  (`learner_safetensors`);
- a LoRA adapter is handed to peft only once its config describes the rank the run asked for
  (`lora_adapter_copy`);
- an SVG figure is read by `grader.suite.plot_reading.read_figure`, within its element and
  point budgets.
Each refusal fails the test that read the file, saying why; the learner's code loses that test.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path

from grader.session.intake import Unreadable, read_inside, resolved_inside

LEARNER_FILE_BYTES = 16 << 20       # the largest file a test reads back from learner code
JSON_BYTES = 1 << 20                # a run record or a log: a 150-step log is about 20 KB
ADAPTER_CONFIG_BYTES = 64 << 10     # a LoRA adapter's config is about 1 KB
ADAPTER_BYTES = 64 << 20            # its weights: rank 16 on the course's tiny Llama is 0.6 MB
ADAPTER_TENSORS = 1024              # the tiny Llama's all-linear adapter holds 56
SAFETENSORS_HEADER_BYTES = 256 << 10    # its header, about 8 KB
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def learner_path(path, within) -> Path:
    """A path the learner's code returned or was to write, once it is known to lie inside the
    folder the test gave that code (`within`), links resolved. Tests run as the grader's user,
    who may read what learner code may not (the course, another learner's folder): any other path
    fails the test, saying why."""
    __tracebackhide__ = True
    with _refused_as_failure(path, within):
        return resolved_inside(within, path)


def learner_file(path, within, limit: int = LEARNER_FILE_BYTES) -> bytes:
    """The bytes of a regular file inside `within` (see `learner_path`), at most `limit` of them."""
    __tracebackhide__ = True
    with _refused_as_failure(path, within, limit):
        return read_inside(within, path, limit)


def learner_json(path, within, limit: int = JSON_BYTES):
    """The JSON value of a file inside `within`, read from at most `limit` bytes."""
    __tracebackhide__ = True
    return _json_value(learner_file(path, within, limit), path)


def learner_jsonl(path, within, limit: int = JSON_BYTES) -> list:
    """The JSON values of the lines of a file inside `within` (blank lines skipped), read from at
    most `limit` bytes."""
    __tracebackhide__ = True
    return [_json_value(line, path) for line in learner_file(path, within, limit).splitlines() if line.strip()]


def learner_png(path, within, max_pixels: int):
    """The PNG at `path` inside `within`, decoded as an array (height, width, channels), once the
    size its decoder will use (every header before its pixel data, not only the first) is at most
    `max_pixels`."""
    __tracebackhide__ = True
    import numpy as np
    from PIL import PngImagePlugin
    data = learner_file(path, within)
    assert data.startswith(_PNG_SIGNATURE), f"{Path(path).name} is not a PNG file"
    try:
        image = PngImagePlugin.PngImageFile(io.BytesIO(data))     # reads the headers, decodes nothing
    except (OSError, SyntaxError, ValueError) as exc:
        raise AssertionError(f"{Path(path).name} does not decode as a PNG ({exc})") from None
    width, height = image.size
    assert width * height <= max_pixels, \
        f"the PNG is {width} x {height} pixels; a figure needs a few hundred a side (the test decodes at most {max_pixels:,})"
    try:
        pixels = np.asarray(image.convert("RGBA") if image.mode == "P" else image)     # a palette as matplotlib reads it
    except (OSError, SyntaxError, ValueError) as exc:
        raise AssertionError(f"{Path(path).name} does not decode as a PNG ({exc})") from None
    assert pixels.shape[:2] == (height, width), f"{Path(path).name} decodes to {pixels.shape}, not {width} x {height}"
    return pixels


def learner_safetensors(path, within, limit: int = ADAPTER_BYTES, tensors: int = ADAPTER_TENSORS) -> dict:
    """The tensors of a safetensors file inside `within`, read from at most `limit` bytes, once its
    header is known to list at most `tensors` of them."""
    __tracebackhide__ = True
    from safetensors.torch import load
    data = _safetensors_bytes(path, within, limit, tensors)
    try:
        return load(data)
    except Exception as exc:            # safetensors raises its own error types
        raise AssertionError(f"{Path(path).name} does not load as safetensors ({exc})") from None


def lora_adapter_copy(adapter_dir, within, rank: int, into: Path) -> Path:
    """The LoRA adapter a learner's run saved in `adapter_dir` (inside `within`), checked and
    copied into the test's own folder `into`, for peft to load in the test's process. peft sizes
    the layers it builds from adapter_config.json before it compares them with the weights, so
    the config must describe a plain LoRA adapter of `rank` (a claimed rank of 130,000 would
    build gigabytes in the grader), and both files are read within their size limits, the
    weights' header within its own."""
    __tracebackhide__ = True
    folder = learner_path(adapter_dir, within)
    config = learner_json(folder / "adapter_config.json", within, limit=ADAPTER_CONFIG_BYTES)
    assert isinstance(config, dict), "adapter_config.json does not hold a JSON object: save with save_pretrained"
    shape = {"peft_type": config.get("peft_type"), "r": config.get("r"),
             **{key: config.get(key) or None for key in ("rank_pattern", "layer_replication", "modules_to_save")}}
    want = {"peft_type": "LORA", "r": rank, "rank_pattern": None, "layer_replication": None, "modules_to_save": None}
    assert shape == want, \
        f"adapter_config.json describes {shape}; the run asked for a LoRA adapter of rank {rank}, as LoraConfig saves it"
    weights = _safetensors_bytes(folder / "adapter_model.safetensors", within, ADAPTER_BYTES, ADAPTER_TENSORS)
    (into / "adapter_config.json").write_text(json.dumps(config))
    (into / "adapter_model.safetensors").write_bytes(weights)
    return into


def _json_value(data: bytes, path):
    __tracebackhide__ = True
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:        # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise AssertionError(f"{Path(path).name} does not hold valid JSON ({str(exc)[:200]})") from None


def _safetensors_bytes(path, within, limit: int, tensors: int) -> bytes:
    """The bytes of a safetensors file inside `within` (at most `limit`), once its header is known
    to be small and to list at most `tensors` tensors. The file starts with its header's length
    (8 bytes, little-endian), then the header: a JSON object naming each tensor (and `__metadata__`)."""
    __tracebackhide__ = True
    data = learner_file(path, within, limit)
    name = Path(path).name
    length = int.from_bytes(data[:8], "little") if len(data) >= 8 else None
    assert length is not None and length <= min(SAFETENSORS_HEADER_BYTES, len(data) - 8), \
        f"{name} is not a safetensors file with a header of at most {SAFETENSORS_HEADER_BYTES:,} bytes: save with save_pretrained"
    header = _json_value(data[8:8 + length], name)
    assert isinstance(header, dict), f"{name}'s header is not a JSON object: save with save_pretrained"
    listed = len(header) - ("__metadata__" in header)
    assert listed <= tensors, f"{name} lists {listed:,} tensors; the adapter the run asked for holds a few dozen " \
                              f"(the test loads at most {tensors:,})"
    return data


@contextlib.contextmanager
def _refused_as_failure(path, within, limit: int = 0):
    """Each reason `intake` refuses a path the learner's code named, as a failed test."""
    __tracebackhide__ = True
    if not isinstance(path, (str, os.PathLike)):
        raise AssertionError(f"expected a path (str), got {type(path).__name__}")
    try:
        yield
    except Unreadable as exc:
        why = {"missing": "could not be read: No such file or directory",
               "outside": f"is not inside the folder the test gave your code ({within}): the grader reads only what "
                          "your code wrote there",
               "not a file": "is not a regular file",
               "too large": f"holds more than {limit:,} bytes, more than this test reads",
               "grew": f"holds more than {limit:,} bytes, more than this test reads",
               "unreadable": f"could not be read: {exc.reason}"}[exc.kind]
        raise AssertionError(f"{path} {why}") from None
