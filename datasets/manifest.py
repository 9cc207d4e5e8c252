"""MANIFEST.json: every built file with its sha256, size and description, the facts measured by the
build, and the data version.

Which files are artifacts: every file inside a subfolder of datasets/ (corpus/, tiny_llama/, sft/, ...),
except README.md files (documentation) and Python caches. Files directly in datasets/ (the builder's
modules, README.md, MANIFEST.json) are source, not artifacts. A new subfolder is covered as soon as a
builder writes files into it.

The data version rule: data_version = sha256 of the sorted lines "<relpath> <sha256>\n" over the files
with "in_data_version": true. That is every file whose bytes a rebuild reproduces exactly, so every file
but the trained weights (tiny_llama/model.safetensors). Those are listed and verified like any file, so
tampering is caught, but retraining them (same loss within tolerance, different bits) does not change
the data version.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

MANIFEST = "MANIFEST.json"
DATA_VERSION_RULE = ("sha256 of the sorted lines '<relpath> <sha256>\\n' over the files whose in_data_version is "
                     "true: every listed file except those a rebuild does not reproduce byte for byte "
                     "(trained weights)")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def artifact_paths(root: Path) -> list[str]:
    """Relative paths (posix) of every artifact under root: files in subfolders, minus READMEs and caches."""
    found = []
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if (path.is_file() and len(rel.parts) > 1 and rel.name != "README.md" and "__pycache__" not in rel.parts
                and path.suffix != ".pyc"):
            found.append(rel.as_posix())
    return sorted(found)


def data_version(files: dict[str, dict]) -> str:
    lines = "".join(f"{rel} {entry['sha256']}\n" for rel, entry in sorted(files.items()) if entry["in_data_version"])
    return hashlib.sha256(lines.encode()).hexdigest()


def file_entry(root: Path, rel: str, description: str, in_data_version: bool) -> dict:
    path = root / rel
    return {"sha256": sha256_file(path), "bytes": path.stat().st_size, "description": description,
            "in_data_version": in_data_version}


def write_manifest(root: Path, files: dict[str, dict], facts: dict) -> dict:
    manifest = {"data_version": data_version(files), "data_version_rule": DATA_VERSION_RULE,
                "files": dict(sorted(files.items())), "facts": facts}
    (root / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return manifest


def read_manifest(root: Path) -> dict:
    return json.loads((root / MANIFEST).read_text(encoding="utf-8"))


def verify(root: Path) -> list[tuple[str, str | None]]:
    """(relpath, problem) for every listed and every unlisted artifact; problem is None when the file
    matches the manifest."""
    if not (root / MANIFEST).exists():
        return [(MANIFEST, "missing")]
    manifest = read_manifest(root)
    results = []
    for rel, entry in sorted(manifest["files"].items()):
        path = root / rel
        if not path.is_file():
            results.append((rel, "missing"))
        elif path.stat().st_size != entry["bytes"]:
            results.append((rel, f"size {path.stat().st_size} bytes, manifest says {entry['bytes']}"))
        elif sha256_file(path) != entry["sha256"]:
            results.append((rel, "sha256 differs from the manifest"))
        else:
            results.append((rel, None))
    for rel in artifact_paths(root):
        if rel not in manifest["files"]:
            results.append((rel, "not listed in the manifest (rebuild, or remove the file)"))
    if data_version(manifest["files"]) != manifest["data_version"]:
        results.append((MANIFEST, "data_version does not match the listed files"))
    return results
