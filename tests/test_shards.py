"""`grader grade --shard I/N`: N slices of the sorted batch, each submission in exactly one, the
same slices whatever order the paths were given in; the index from the environment as a
Kubernetes Indexed Job (JOB_COMPLETION_INDEX) or a Slurm array (SLURM_ARRAY_TASK_ID) gives it."""
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grader.course import COURSE
from grader.running.shards import Shard, ShardError, parse


def paths_named(names):
    return [Path("/batch") / name for name in names]


@given(st.lists(st.text("abcdefgh", min_size=1, max_size=4), max_size=40, unique=True), st.integers(1, 12),
       st.randoms(use_true_random=False))
def test_the_shards_cover_the_batch_once_in_near_equal_slices(names, count, rng):
    paths = paths_named(names)
    slices = [Shard(i, count).select(paths) for i in range(count)]
    picked = [i for one in slices for i in one]
    assert sorted(picked) == list(range(len(paths)))                       # each submission exactly once
    assert max(map(len, slices)) - min(map(len, slices)) <= 1
    shuffled = paths[:]
    rng.shuffle(shuffled)                 # another shell's glob order: the same submissions in each slice
    for i, one in enumerate(slices):
        assert sorted(shuffled[j] for j in Shard(i, count).select(shuffled)) == sorted(paths[j] for j in one)


def test_slices_are_consecutive_blocks_of_the_sorted_paths():
    paths = paths_named(["e", "a", "d", "b", "c"])
    assert [[paths[i].name for i in Shard(k, 2).select(paths)] for k in range(2)] == [["a", "b"], ["c", "d", "e"]]
    assert [paths[i].name for i in Shard(3, 4).select(paths)] == ["d", "e"]
    assert Shard(4, 6).select(paths) == [2]               # more shards than submissions: some get none
    assert Shard(0, 6).select(paths) == []


def test_relative_and_absolute_spellings_sort_alike(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spelled = [Path("b"), tmp_path / "a", Path("./c")]
    assert [spelled[i] for i in Shard(0, 3).select(spelled)] == [tmp_path / "a"]
    assert [spelled[i] for i in Shard(2, 3).select(spelled)] == [Path("./c")]


@pytest.mark.parametrize("text, environ, expected", [
    ("0/4", {}, Shard(0, 4)),
    ("3/4", {"JOB_COMPLETION_INDEX": "1"}, Shard(3, 4)),          # an explicit index wins
    ("4", {"JOB_COMPLETION_INDEX": "2"}, Shard(2, 4)),
    ("4", {"SLURM_ARRAY_TASK_ID": "3"}, Shard(3, 4)),
    ("4", {"JOB_COMPLETION_INDEX": "0", "SLURM_ARRAY_TASK_ID": "3"}, Shard(0, 4)),
    ("0/1", {}, Shard(0, 1)),
])
def test_the_index_comes_from_the_option_or_the_environment(text, environ, expected):
    assert parse(text, environ) == expected


@pytest.mark.parametrize("text, environ, says", [
    ("4/4", {}, "from 0 to N-1 = 3"),                     # 1-based by mistake
    ("-1/4", {}, "from 0"),
    ("0/0", {}, "N >= 1"),
    ("a/4", {}, "whole numbers"),
    ("4", {}, "JOB_COMPLETION_INDEX or SLURM_ARRAY_TASK_ID"),
    ("4", {"JOB_COMPLETION_INDEX": "  "}, "JOB_COMPLETION_INDEX"),
    ("4", {"JOB_COMPLETION_INDEX": "7"}, "from 0 to N-1 = 3"),
])
def test_a_shard_that_names_no_slice_is_refused(text, environ, says):
    with pytest.raises(ShardError, match=says):
        parse(text, environ)


def grader(*args, cwd=COURSE.root, env=None):
    return subprocess.run([sys.executable, "-m", "grader.cli", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=600, env={**os.environ, **(env or {})})


def test_a_shard_grades_its_slice_alone_and_summarises_the_whole_out_dir(tmp_path):
    """Two submissions, two shards: `exercises` sorts before `solutions`, so shard 1 (from the
    environment, as a pod gets it) is the reference alone. The class summary it writes lists
    every report in the out-dir, the other shard's too."""
    out = tmp_path / "grading"
    other = out / "exercises" / "score_report.json"        # as shard 0 would have left it
    other.parent.mkdir(parents=True)
    subs = [COURSE.root / "solutions", COURSE.root / "exercises"]
    usage = grader("grade", *subs, "--tasks", "01", "--shard", "2", "--out-dir", out)
    assert usage.returncode == 2 and "JOB_COMPLETION_INDEX" in usage.stdout
    result = grader("grade", *subs, "--tasks", "01", "--shard", "2", "--out-dir", out,
                    env={"JOB_COMPLETION_INDEX": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(p.parent.name for p in out.glob("*/score_report.json")) == ["solutions"]
    report = json.loads((out / "solutions" / "score_report.json").read_text())
    assert report["total"]["percent"] == 100.0
    assert "done 1/1" in result.stderr                      # the plain progress line of a log
    # shard 0's report arrives: the next shard's summary has both
    other.write_text((out / "solutions" / "score_report.json").read_text().replace(
        str(COURSE.root / "solutions"), str(COURSE.root / "exercises")))
    again = grader("grade", *subs, "--tasks", "01", "--shard", "1/2", "--out-dir", out, "--resume")
    assert again.returncode == 0, again.stdout + again.stderr
    with open(out / "summary.csv") as f:
        assert sorted(row["submission"] for row in csv.DictReader(f)) == ["exercises", "solutions"]


def test_a_slice_or_a_cluster_batch_needs_an_out_dir(tmp_path):
    for extra in (["--shard", "0/2"], ["--executor", "slurm"]):
        result = grader("grade", "solutions", "exercises", *extra)
        assert result.returncode == 2 and "--out-dir" in result.stdout, result.stdout + result.stderr
    result = grader("grade", "solutions", "--shard", "0/2", "--out-dir", tmp_path / "o", "--json", tmp_path / "r.json")
    assert result.returncode == 2
    assert not (tmp_path / "o").exists()             # refused before anything was graded
