"""`grader check NN` costs its tests plus little: a lone session imports only what its own task
needs, while a pool process that serves several sessions imports the libraries every suite needs
once, ahead of them (`grader.running.pool`)."""
from grader.running.pool import PytestPool

PROBE = '''import sys


def test_no_library_imported_ahead():
    assert "transformers" not in sys.modules
'''


def test_a_lone_session_imports_no_library_ahead_and_a_batch_shares_them(tmp_path):
    (tmp_path / "test_probe.py").write_text(PROBE)
    session = [str(tmp_path / "test_probe.py"), "-q", "-p", "no:cacheprovider"]
    assert PytestPool(1).run([([session], tmp_path / "lone.log")], limit_s=120) == [[0]], \
        (tmp_path / "lone.log").read_text()
    assert PytestPool(1).run([([session, session], tmp_path / "batch.log")], limit_s=120) == [[1, 1]], \
        "the control: sessions of a batch find transformers imported ahead"
