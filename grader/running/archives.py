"""Submissions that arrive as zip files (an LMS download, an upload): unpacked with care.

Only regular files whose names stay inside the folder are written; absolute names, `..`
components, links, devices and anything over the size limits are refused and listed, never
followed. What a learner's module needs is a handful of small `.py` files, so the limits are tight.
"""
from __future__ import annotations

import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

MAX_FILES = 2000
MAX_TOTAL_BYTES = 64 << 20
MAX_FILE_BYTES = 8 << 20


@dataclass
class Unpacked:
    root: Path
    refused: list[str] = field(default_factory=list)     # "name: why", for the report's problems


def unpack(archive: Path, into: Path) -> Unpacked:
    """Unpack `archive` into the new folder `into`; a corrupt archive raises ValueError."""
    result = Unpacked(Path(into))
    result.root.mkdir(parents=True)
    try:
        with zipfile.ZipFile(archive) as bundle:
            entries = bundle.infolist()
            if len(entries) > MAX_FILES:
                raise ValueError(f"{archive.name} holds {len(entries)} entries; at most {MAX_FILES} are unpacked")
            total = 0
            for entry in entries:
                why = _refusal(entry)
                if why is None and total + entry.file_size > MAX_TOTAL_BYTES:
                    why = f"the archive unpacks to more than {MAX_TOTAL_BYTES >> 20} MiB"
                if why:
                    result.refused.append(f"{entry.filename!r}: {why}")
                    continue
                if entry.is_dir():
                    continue
                target = result.root.joinpath(*PurePosixPath(entry.filename).parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                with bundle.open(entry) as source, open(target, "wb") as sink:
                    data = source.read(MAX_FILE_BYTES + 1)
                    if len(data) > MAX_FILE_BYTES:       # the header lied about the size
                        result.refused.append(f"{entry.filename!r}: larger than {MAX_FILE_BYTES >> 20} MiB")
                        sink.close()
                        target.unlink()
                        continue
                    sink.write(data)
                total += entry.file_size
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError) as exc:
        raise ValueError(f"{archive.name} is not a readable zip file: {exc}") from None
    return result


def _refusal(entry: zipfile.ZipInfo) -> str | None:
    name = entry.filename
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return "an absolute name"
    if ".." in path.parts:
        return "a name that leaves the folder"
    if any(part in ("", ".") for part in path.parts) and not entry.is_dir():
        return "an empty name"
    kind = stat.S_IFMT(entry.external_attr >> 16)   # 0: no file type recorded (DOS tools, Python's writestr)
    if kind not in (0, stat.S_IFREG) and not entry.is_dir():
        return "not a regular file (a link or a device)"
    if entry.file_size > MAX_FILE_BYTES:
        return f"larger than {MAX_FILE_BYTES >> 20} MiB"
    return None
