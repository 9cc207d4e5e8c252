"""Every submission of a batch gets an output folder of its own, whatever the submissions are
called: a folder's or an upload's name is learner data, and a learner may name theirs like the
numbering of a repeated name (`sub-2`). A report that lands in another submission's folder gives
one learner another's grade; an unpacking clash stops the whole batch. `--resume` finds each
submission's report by the path it records, never by its folder's name alone."""
import csv
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader.running.batch import unique_names
from grader.worker.loading import sibling_module

hostile = sibling_module(__file__, "hostile")

# The collisions: a learner whose folder is named like the numbering of a repeated name, between
# two learners of the same name; and two uploads of the same name beside one named like its number.
FOLDERS = {"1_alice/sub": hostile.REFERENCE, "2_mallory/sub-2": hostile.STUB, "3_bob/sub": hostile.REFERENCE}
ZIPS = {"a/attention.zip": hostile.STUB, "b/attention.zip": hostile.REFERENCE, "c/attention-2.zip": hostile.STUB}
PERCENT = {hostile.REFERENCE: 100.0, hostile.STUB: 0.0}


def test_names_are_unique_against_every_name_of_the_batch(tmp_path):
    (tmp_path / "targets" / "sub").mkdir(parents=True)
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / "carol").symlink_to(tmp_path / "targets" / "sub")        # a link named for its target
    cases = [
        ["1_alice/sub", "2_mallory/sub-2", "3_bob/sub"],
        ["1_alice/sub", "3_bob/sub", "2_mallory/sub-2"],
        ["a/attention.zip", "b/attention.zip", "c/attention-2.zip"],
        ["a/x", "b/X", "c/x-2", "d/X-2", "e/x-3"],                        # case-insensitive file systems
        ["a/a b", "b/a_b", "c/a_b-2"],                                    # names that are equal once made safe
        ["a/summary.csv", "b/summary.csv_", "c/summary.csv"],             # the gradebook's own name
        ["links/carol", "targets/sub", "x/sub-2"],
        ["a/" + "x" * 300, "b/" + "x" * 299, "c/" + "注" * 100 + ".zip"],  # past a file system's 255 bytes
    ]
    for case in cases:
        names = unique_names([tmp_path / p for p in case])
        assert len({n.lower() for n in names}) == len(case), (case, names)
        assert all(len(n.encode()) < 255 and n not in (".", "..") for n in names), names
    names = unique_names([tmp_path / p for p in cases[0]])
    assert names[:2] == ["sub", "sub-2"], names          # the first of each name, and a learner's own name, kept


def grader(*args, cwd):
    return subprocess.run([sys.executable, "-m", "grader.cli", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=1200, env={**os.environ, "OMP_NUM_THREADS": "1"})


def reports_by_path(out: Path) -> dict[str, tuple[str, dict]]:
    found = {}
    for path in sorted(out.glob("*/score_report.json")):
        report = json.loads(path.read_text(encoding="utf-8"))
        assert report["submission"]["path"] not in found, f"two folders hold {report['submission']['path']}"
        found[report["submission"]["path"]] = (path.parent.name, report)
    return found


@pytest.mark.timeout(900)          # seven gradings and a resume: minutes on a loaded 2-core machine
def test_colliding_names_each_get_their_own_folder_and_resume_finds_reports_by_path(tmp_path):
    subs, out = tmp_path / "subs", tmp_path / "grading"
    sources = {}
    for name, source in FOLDERS.items():
        module = subs / name / hostile.TASK / "attention.py"
        module.parent.mkdir(parents=True)
        module.write_text(source, encoding="utf-8")
        sources[str(subs / name)] = source
    for name, source in ZIPS.items():
        (subs / name).parent.mkdir(parents=True)
        with zipfile.ZipFile(subs / name, "w") as bundle:
            bundle.writestr("attention.py", source)           # a flat upload
        sources[str(subs / name)] = source
    paths = list(sources)

    first = grader("grade", *paths, "--tasks", "01", "--jobs", "2", "--out-dir", out, cwd=tmp_path)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    graded = reports_by_path(out)
    assert sorted(graded) == sorted(paths), sorted(graded)
    for path, (folder, report) in graded.items():
        assert report["total"]["percent"] == PERCENT[sources[path]], (path, folder, report["total"])
        assert (out / folder / "report.html").is_file()
    with open(out / "summary.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert sorted(r["path"] for r in rows) == sorted(paths)
    assert {r["path"]: (r["submission"], float(r["percent"])) for r in rows} == \
        {p: (graded[p][0], PERCENT[sources[p]]) for p in paths}

    # a batch stopped before Bob's report was written, resumed with its submissions in another order
    bob = str(subs / "3_bob/sub")
    (out / graded[bob][0] / "score_report.json").unlink()
    kept = {p: (out / folder / "score_report.json").read_bytes() for p, (folder, _) in graded.items() if p != bob}
    again = grader("grade", *reversed(paths), "--tasks", "01", "--out-dir", out, "--resume", cwd=tmp_path)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    resumed = reports_by_path(out)
    assert sorted(resumed) == sorted(paths)
    assert {p: (out / resumed[p][0] / "score_report.json").read_bytes() for p in kept} == kept
    assert resumed[bob][1]["total"]["percent"] == 100.0
    with open(out / "summary.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert {r["path"]: (r["submission"], float(r["percent"])) for r in rows} == \
        {p: (resumed[p][0], PERCENT[sources[p]]) for p in paths}
