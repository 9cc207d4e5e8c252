"""What the suites read back from learner code: only files inside the test's own folder, regular,
and not too large. Tests run as the grader's user, who may read what learner code may not."""
import os
import re

import pytest

from grader.suite.learner_files import learner_file, learner_path


def test_a_file_the_learner_wrote_inside_the_folder_is_read(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.json").write_bytes(b'{"run_id": "a"}')
    os.symlink(tmp_path / "run" / "run.json", tmp_path / "latest.json")
    assert learner_file(str(tmp_path / "run" / "run.json"), tmp_path) == b'{"run_id": "a"}'
    assert learner_file(tmp_path / "latest.json", tmp_path) == b'{"run_id": "a"}'
    assert learner_path(tmp_path / "run" / ".." / "run", tmp_path) == tmp_path.resolve() / "run"


@pytest.mark.parametrize("case, message", [
    ("outside", "is not inside the folder the test gave your code"),
    ("link_outside", "is not inside the folder the test gave your code"),
    ("the_folder_itself", "is not inside the folder the test gave your code"),
    ("pipe", "is not a regular file"),
    ("missing", "could not be read: No such file"),
    ("too_large", "holds more than 1,048,576 bytes"),
    ("not_a_path", "expected a path (str), got dict"),
])
def test_anything_else_fails_the_test_saying_why(tmp_path, case, message):
    outside = tmp_path / "secret.json"
    outside.write_text('{"run_id": "someone else\'s"}')
    folder = tmp_path / "test_folder"
    folder.mkdir()
    os.symlink(outside, folder / "link")
    os.mkfifo(folder / "pipe")                       # opened without waiting for a writer
    (folder / "big").write_bytes(b"x" * ((1 << 20) + 1))
    path = {"outside": str(outside), "link_outside": folder / "link", "the_folder_itself": folder,
            "pipe": folder / "pipe", "missing": folder / "run.json", "too_large": folder / "big",
            "not_a_path": {"record": "run.json"}}[case]
    with pytest.raises(AssertionError, match=re.escape(message)):
        learner_file(path, folder, limit=1 << 20)

