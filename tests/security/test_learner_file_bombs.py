"""Files learner code writes that would swell the grading's own process where they are parsed:
a PNG whose first header claims one pixel and a later one 16 million (Pillow decodes by the last;
a check of the first let 62 KB decode to 244 MiB), a safetensors file of 200,000 empty tensors
(12 MB that loads as 167 MiB), a run record of sixteen mebibytes of `{},` (357 MiB of dicts). Each
reader of `grader.suite.learner_files` refuses them before it builds anything, failing the test
that read the file and saying why."""
import re
import zlib

import pytest
import torch
from safetensors.torch import save_file

from grader.suite.learner_files import learner_json, learner_jsonl, learner_png, learner_safetensors


def _chunk(kind: bytes, body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + kind + body + zlib.crc32(kind + body).to_bytes(4, "big")


def _png(width: int, height: int, second_header: tuple[int, int] | None = None) -> bytes:
    """An RGBA PNG of `width` x `height` (every pixel white), with a second header claiming
    another size where given."""
    header = lambda w, h: _chunk(b"IHDR", w.to_bytes(4, "big") + h.to_bytes(4, "big") + bytes([8, 6, 0, 0, 0]))  # noqa: E731
    rows = b"".join(b"\x00" + b"\xff" * 4 * width for _ in range(height))
    extra = header(*second_header) if second_header else b""
    return (b"\x89PNG\r\n\x1a\n" + header(width, height) + extra + _chunk(b"IDAT", zlib.compress(rows))
            + _chunk(b"IEND", b""))


def test_a_png_is_decoded_within_its_pixel_limit_whatever_its_first_header_says(tmp_path):
    (tmp_path / "plain.png").write_bytes(_png(3, 2))
    assert learner_png(tmp_path / "plain.png", tmp_path, max_pixels=100).shape == (2, 3, 4)
    two_headers = _png(1, 1, second_header=(4000, 4000))
    assert int.from_bytes(two_headers[16:20], "big") == 1        # its first header: one pixel
    (tmp_path / "bomb.png").write_bytes(two_headers)
    with pytest.raises(AssertionError, match=re.escape("the PNG is 4000 x 4000 pixels")):
        learner_png(tmp_path / "bomb.png", tmp_path, max_pixels=10_000_000)
    (tmp_path / "text.png").write_bytes(b"not a png")
    with pytest.raises(AssertionError, match="is not a PNG file"):
        learner_png(tmp_path / "text.png", tmp_path, max_pixels=100)


def test_a_safetensors_file_is_loaded_only_with_a_small_header_listing_few_tensors(tmp_path):
    save_file({"lora_A": torch.ones(2, 3), "lora_B": torch.zeros(3, 2)}, tmp_path / "adapter.safetensors")
    assert set(learner_safetensors(tmp_path / "adapter.safetensors", tmp_path)) == {"lora_A", "lora_B"}
    save_file({f"t{i}": torch.zeros(0) for i in range(2000)}, tmp_path / "many.safetensors")
    with pytest.raises(AssertionError, match="lists 2,000 tensors"):
        learner_safetensors(tmp_path / "many.safetensors", tmp_path)
    (tmp_path / "claims.safetensors").write_bytes((1 << 40).to_bytes(8, "little") + b"{}")
    with pytest.raises(AssertionError, match="not a safetensors file with a header of at most"):
        learner_safetensors(tmp_path / "claims.safetensors", tmp_path)


def test_json_is_read_from_a_mebibyte_and_said_when_broken(tmp_path):
    (tmp_path / "run.json").write_text('{"run_id": "a"}')
    (tmp_path / "log.jsonl").write_text('{"step": 1}\n\n{"step": 2}\n')
    assert learner_json(tmp_path / "run.json", tmp_path) == {"run_id": "a"}
    assert learner_jsonl(tmp_path / "log.jsonl", tmp_path) == [{"step": 1}, {"step": 2}]
    (tmp_path / "flood.json").write_text("[" + "{}," * 400_000 + "{}]")
    with pytest.raises(AssertionError, match=re.escape("holds more than 1,048,576 bytes")):
        learner_json(tmp_path / "flood.json", tmp_path)
    (tmp_path / "broken.json").write_text('{"run_id": ')
    with pytest.raises(AssertionError, match="does not hold valid JSON"):
        learner_json(tmp_path / "broken.json", tmp_path)
