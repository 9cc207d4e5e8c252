#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image: it installs the
# course's pinned set into a virtual environment at $ROOT/venv.
#   - with a wheels/ folder in the zip (grader gradescope --wheels DIR), offline: pip reads
#     only those wheels;
#   - without one, from the package indexes: torch's CPU build first (PyPI's default torch
#     wheel pulls several GB of CUDA), then everything else within constraints.txt.
# `setup.sh --dry-run` prints the commands instead of running them. AUTOGRADER_ROOT moves the
# whole tree (default /autograder), for a rehearsal outside Gradescope.
set -euo pipefail

ROOT="${AUTOGRADER_ROOT:-/autograder}"
SOURCE="$ROOT/source"
VENV="$ROOT/venv"
DRY_RUN=0
[ "${1:-}" = "--dry-run" ] && DRY_RUN=1

run() {
    if [ "$DRY_RUN" = 1 ]; then echo "+ $*"; else "$@"; fi
}

TORCH="$(grep '^torch==' "$SOURCE/constraints.txt")"
if ! python3 -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
    run apt-get install -y python3 python3-venv python3-pip
fi
run python3 -m venv "$VENV"
if [ -d "$SOURCE/wheels" ]; then
    FROM=(--no-index --find-links "$SOURCE/wheels")
    run "$VENV/bin/pip" install "${FROM[@]}" "$TORCH"
else
    FROM=()
    run "$VENV/bin/pip" install --index-url https://download.pytorch.org/whl/cpu "$TORCH"
fi
run "$VENV/bin/pip" install "${FROM[@]}" -c "$SOURCE/constraints.txt" "setuptools>=77"
# Editable, so that the grader finds the course (its suites and data) where it was unpacked.
run "$VENV/bin/pip" install "${FROM[@]}" -c "$SOURCE/constraints.txt" --no-build-isolation -e "$SOURCE"
