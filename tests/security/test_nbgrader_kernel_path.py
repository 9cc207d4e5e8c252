"""nbgrader autograde copies every file of a submission beside its notebook and starts the kernel
there, a kernel that runs as the instructor and can read the hidden suites. Files named like the
modules that kernel imports (the kernel's own launcher, pytest, the course's `grader` package,
numpy, Python's start-up `sitecustomize`) must not be imported from that folder: each one here,
if imported, writes a marker outside the folder.

The kernel is started as `nbgrader autograde` starts it: the Execute preprocessor that the
course's `nbgrader_config.py` (as `grader nbgrader` writes it) puts in autograde's list, with
that config and `NBGRADER_EXECUTION=autograde`, in the submission's folder; and with a
PYTHONPATH that has an empty and a relative entry, both of which name the kernel's working
folder. tests/test_nbgrader.py runs the same submissions through real nbgrader, end to end.
"""
import json
import os
from pathlib import Path

import pytest
from traitlets.config.loader import PyFileConfigLoader
from traitlets.utils.importstring import import_item

from grader.delivery import nbgrader as delivery
from grader.worker.loading import sibling_module

hostile = sibling_module(__file__, "hostile")

pytest.importorskip("nbgrader")

KERNEL_TIMEOUT_S = 120          # a kernel start and three small cells, on 2 busy cores


def autograde_execute(course: Path):
    """The Execute preprocessor `nbgrader autograde` runs with this course's config."""
    from nbconvert.preprocessors import ExecutePreprocessor
    from nbgrader.converters import Autograde
    config = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    listed = (config.Autograde.autograde_preprocessors if "autograde_preprocessors" in config.Autograde
              else Autograde.class_traits()["autograde_preprocessors"].default())
    classes = [import_item(p) if isinstance(p, str) else p for p in listed]
    execute = next(c for c in classes if issubclass(c, ExecutePreprocessor))
    return execute(config=config)


def test_the_autograde_kernel_imports_nothing_from_the_submission_folder(tmp_path, monkeypatch):
    import nbformat
    course, markers = tmp_path / "course", tmp_path / "markers"
    folder = course / "autograded" / "mallory" / "01_einsum_attention"
    folder.mkdir(parents=True)
    markers.mkdir()
    delivery.update_config(course)
    for name, module in hostile.NOTEBOOK_SHADOWS.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(hostile.notebook_shadow(name, markers / module), encoding="utf-8")
    cells = ["import pytest, numpy\nfrom grader.delivery.nbgrader_cells import ConceptCell",
             "import json, sys, pytest, numpy, grader\n"
             "print(json.dumps({'path': sys.path, 'files': [pytest.__file__, numpy.__file__, grader.__file__]}))"]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["", ".", *filter(None, [os.environ.get("PYTHONPATH")])]))
    executor = autograde_execute(course)
    executor.timeout = KERNEL_TIMEOUT_S
    try:
        executor.preprocess(notebook, {"metadata": {"path": str(folder)}})
    finally:        # a learner's launcher may run and exit: its mark is the finding
        assert sorted(p.name for p in markers.iterdir()) == [], "learner files were imported by the autograde kernel"

    errors = [o for c in notebook.cells for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    seen = json.loads(notebook.cells[1].outputs[0]["text"])
    folder_names = {"", ".", str(folder), str(folder.resolve())}
    assert not folder_names & set(seen["path"]), seen["path"]
    assert not [f for f in seen["files"] if Path(f).resolve().is_relative_to(folder.resolve())], seen["files"]

