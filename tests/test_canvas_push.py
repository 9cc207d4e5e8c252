"""`grader export --canvas-url`: the grades pushed with canvasapi to a local server that answers the
Canvas REST endpoints it uses, as Canvas documents them (no Canvas is reachable from here): the
course and assignment reads, and the bulk grade update. The dry run posts nothing; --push posts
each learner's final points, scaled to the assignment's points possible; a wrong assignment, an
unreachable server or a missing token is said, and nothing is posted."""
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from grader import cli
from grader.course import COURSE
from grader.gradebook.store import Gradebook
from grader.schema import report as schema

TOKEN = "a-test-token"
# the local server speaks plain HTTP; canvasapi warns that a real Canvas should be reached over HTTPS
pytestmark = pytest.mark.filterwarnings("ignore:Canvas may respond unexpectedly:UserWarning")
TASK = COURSE.task_named("01")


class FakeCanvas(BaseHTTPRequestHandler):
    posts: list = []
    reads: list = []

    def do_GET(self):       # noqa: N802 (http.server's name)
        if not self._authorised():
            return
        self.reads.append(self.path)
        found = {"/api/v1/courses/7": {"id": 7, "name": "L1 exercises"},
                 "/api/v1/courses/7/assignments/11": {"id": 11, "course_id": 7, "name": "Einsum attention",
                                                      "points_possible": 10.0}}.get(self.path.split("?")[0])
        if found is None:
            self._answer(404, {"errors": [{"message": "The specified resource does not exist."}]})
        else:
            self._answer(200, found)

    def do_POST(self):      # noqa: N802
        if not self._authorised():
            return
        body = self.rfile.read(int(self.headers["Content-Length"])).decode()
        self.posts.append((self.path, urllib.parse.parse_qs(body)))
        self._answer(200, {"id": 5, "workflow_state": "queued", "url": "http://canvas/api/v1/progress/5"})

    def _authorised(self) -> bool:
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self._answer(401, {"errors": [{"message": "Invalid access token."}]})
            return False
        return True

    def _answer(self, status: int, data: dict) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def canvas():
    FakeCanvas.posts, FakeCanvas.reads = [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeCanvas)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def batch(tmp_path):
    """Two learners graded on exercise 01 (4 points: ada 4, bob 1), and a roster with their Canvas ids."""
    with Gradebook.open(tmp_path / "batch") as book:
        for learner, lost in (("ada", False), ("bob", True)):
            tests = [schema.TestResult(f"t::{name}", TASK.name, "hidden", name, "failed" if lost and points > 1 else "passed",
                                       True, points) for name, points in (("a", 3.0), ("b", 1.0))]
            book.record(learner, schema.ScoreReport(
                run={"run_id": f"run-{learner}"}, submission={"path": str(tmp_path / learner)},
                tasks=[schema.TaskResult(TASK.name, TASK.title, schema.ModuleInfo("m", True, "x"), tests, "v1")]))
    (tmp_path / "roster.csv").write_text("learner,id,student\nada,101,Ada\nbob,102,Bob\n")
    return tmp_path


def export(batch, url, *extra) -> int:
    return cli.main(["export", str(batch / "batch"), "--roster", str(batch / "roster.csv"), "--canvas-url", url,
                     "--canvas-course", "7", *extra])


def said(capsys) -> str:
    return " ".join(capsys.readouterr().out.split())


def test_the_dry_run_reads_canvas_and_posts_nothing(canvas, batch, monkeypatch, capsys):
    monkeypatch.setenv("CANVAS_TOKEN", TOKEN)
    assert export(batch, canvas, "--assignment", "01=11") == cli.OK
    out = said(capsys)
    assert "'Einsum attention': 2 learner(s), points scaled x2.5" in out and "nothing was posted" in out
    assert FakeCanvas.reads and not FakeCanvas.posts


def test_push_posts_each_learners_final_points_scaled_to_the_assignment(canvas, batch, monkeypatch, capsys):
    monkeypatch.setenv("CANVAS_TOKEN", TOKEN)
    assert export(batch, canvas, "--assignment", "01=11", "--push") == cli.OK
    ((path, form),) = FakeCanvas.posts
    assert path == "/api/v1/courses/7/assignments/11/submissions/update_grades"
    assert form == {"grade_data[101][posted_grade]": ["10.0"], "grade_data[102][posted_grade]": ["2.5"]}
    assert "2 grade(s) posted to 'Einsum attention'" in said(capsys)
    with Gradebook.open(batch / "batch", create=False) as book:
        assert book.db.execute("SELECT kind, rows FROM exports").fetchall() == [("canvas push", 2)]


@pytest.mark.parametrize("problem, expected", [
    ("wrong assignment", "Canvas could not be read (ResourceDoesNotExist"),
    ("wrong token", "Canvas could not be read (Unauthorized"),
    ("no server", "Canvas could not be read (ConnectionError"),
    ("no token", "needs a Canvas API token in $CANVAS_TOKEN"),
    ("bad assignment", "expected TASK=ID"),
])
def test_what_cannot_be_pushed_is_said_and_nothing_is_posted(canvas, batch, monkeypatch, capsys, problem, expected):
    monkeypatch.setenv("CANVAS_TOKEN", "wrong" if problem == "wrong token" else TOKEN)
    if problem == "no token":
        monkeypatch.delenv("CANVAS_TOKEN")
    url = "http://127.0.0.1:9" if problem == "no server" else canvas
    assignment = {"wrong assignment": "01=99", "bad assignment": "01=eleven"}.get(problem, "01=11")
    assert export(batch, url, "--assignment", assignment, "--push") == cli.USAGE
    assert expected in said(capsys)
    assert not FakeCanvas.posts
