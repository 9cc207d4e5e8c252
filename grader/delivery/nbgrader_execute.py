"""The Execute preprocessor of this course's `nbgrader autograde`: nbgrader's own, whose kernel
imports nothing from the submission's folder.

nbgrader copies every file of a submission beside its notebook and starts the kernel in that
folder, as `python -m ipykernel_launcher`, with the instructor's rights and the hidden suites in
reach. Python's `-m` puts the working folder first on sys.path, so a learner's
`ipykernel_launcher.py` would be the kernel; an empty or relative PYTHONPATH entry names that
folder too, before `sitecustomize` is looked up; and IPython puts the folder back on sys.path
ahead of site-packages (`InteractiveShellApp.init_path`), so a `pytest.py` or a `grader/` package
beside the notebook would be what the test cells import. So the kernel starts in Python's safe-path
mode (`PYTHONSAFEPATH`, which IPython's `init_path` respects too), its PYTHONPATH keeps only
absolute entries, and the course config also tells IPython to leave the folder out
(`--InteractiveShellApp.ignore_cwd=True` in `Execute.extra_arguments`).

`grader nbgrader` names this class in the course's nbgrader_config.py, in nbgrader's list of
autograde preprocessors (`autograde_preprocessors`), where it takes the place of nbgrader's Execute;
`c.Execute` settings still apply to it.
"""
from __future__ import annotations

import os
import sys

from nbclient.util import run_sync
from nbgrader.preprocessors import Execute as NbgraderExecute

SAFE_PATH_SINCE = (3, 11)        # the first Python with PYTHONSAFEPATH


class UnsafeKernel(RuntimeError):
    """This Python cannot start a kernel that keeps its working folder off sys.path."""


class Execute(NbgraderExecute):
    async def async_start_new_kernel(self, **kwargs) -> None:
        kwargs["env"] = kernel_environment(kwargs.get("env", os.environ))
        await super().async_start_new_kernel(**kwargs)

    start_new_kernel = run_sync(async_start_new_kernel)


def kernel_environment(environ) -> dict[str, str]:
    """`environ` for a kernel whose working folder holds learner files: safe-path mode, and no
    PYTHONPATH entry that resolves against the working folder."""
    if sys.version_info < SAFE_PATH_SINCE:
        raise UnsafeKernel(f"this course's autograde needs Python {'.'.join(map(str, SAFE_PATH_SINCE))} or newer: "
                           "older ones put the submission's folder on the kernel's sys.path, where a learner's "
                           "files would run as the instructor")
    env = {**environ, "PYTHONSAFEPATH": "1"}
    kept = [entry for entry in env.pop("PYTHONPATH", "").split(os.pathsep) if os.path.isabs(entry)]
    if kept:
        env["PYTHONPATH"] = os.pathsep.join(kept)
    return env


def autograde_preprocessors() -> list:
    """nbgrader's autograde preprocessors, in its order, with this Execute in place of its own."""
    from nbgrader.converters import Autograde
    return [Execute if step is NbgraderExecute else step
            for step in Autograde.class_traits()["autograde_preprocessors"].default()]
