"""Delivery figures: the size of a student release and of the Gradescope autograder zip, and
the time `run_autograder` takes on the reference in a simulated Gradescope harness (the zip
unpacked into a temporary /autograder-shaped tree, graded with this interpreter). A benchmark,
not a test: it prints numbers and asserts nothing.

    python benchmarks/delivery.py                # every task
    python benchmarks/delivery.py --tasks 01     # some tasks
    python benchmarks/delivery.py --screenshot report.png   # also the HTML report, shot in Chromium
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from grader.course import COURSE
from grader.delivery.gradescope import build_autograder
from grader.delivery.release import build_release


def megabytes(n_bytes: int) -> str:
    return f"{n_bytes / 1e6:.1f} MB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=[])
    parser.add_argument("--screenshot", type=Path, help="shoot the reference's HTML report here (needs Chromium)")
    args = parser.parse_args()
    tasks = [COURSE.task_named(t) for t in args.tasks] or list(COURSE.tasks())
    with tempfile.TemporaryDirectory(prefix="delivery-") as scratch:
        scratch = Path(scratch)
        start = time.perf_counter()
        release = build_release(scratch / "release", tasks)
        print(f"release: {release.files} files, {megabytes(release.bytes)} "
              f"(data {', '.join(release.datasets)}), built in {time.perf_counter() - start:.1f} s")
        autograder = build_autograder(scratch / "autograder.zip", tasks)
        with zipfile.ZipFile(autograder.path) as archive:
            unpacked = sum(info.file_size for info in archive.infolist())
            root = scratch / "autograder"
            archive.extractall(root / "source")
        print(f"gradescope zip: {autograder.files} files, {megabytes(autograder.bytes)} "
              f"({megabytes(unpacked)} unpacked)")
        shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")
        (root / "submission").mkdir()
        for task in tasks:
            shutil.copy2(task.reference_module, root / "submission")
        env = {**os.environ, "AUTOGRADER_ROOT": str(root), "GRADER_PYTHON": sys.executable}
        start = time.perf_counter()
        subprocess.run(["bash", str(root / "run_autograder")], cwd=root, env=env, capture_output=True, check=True)
        seconds = time.perf_counter() - start
        results = json.loads((root / "results" / "results.json").read_text())
        graded = sum(1 for t in results["tests"] if t["extra_data"]["graded"])
        print(f"run_autograder on the reference: {seconds:.1f} s wall, score {results['score']:g}, "
              f"{len(results['tests'])} tests ({graded} graded), "
              f"results.json {megabytes(len((root / 'results' / 'results.json').read_bytes()))}")
        if args.screenshot:
            browser = shutil.which("chromium") or shutil.which("chromium-browser")
            if browser is None:
                print("no Chromium: no screenshot")
                return
            subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                            "--window-size=1100,6000", f"--screenshot={args.screenshot.resolve()}",
                            (root / "results" / "report.html").as_uri()], capture_output=True, timeout=120)
            print(f"screenshot of the HTML report: {args.screenshot.resolve()}")


if __name__ == "__main__":
    main()
