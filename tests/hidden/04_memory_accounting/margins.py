"""The figures behind the activation tolerance of exercise 04's hidden suite. Not a test: it prints
numbers and asserts nothing.

    python tests/hidden/04_memory_accounting/margins.py

For every measurement the suite compares `activation_bytes` with (scaled-down models on the CPU,
full-size zoo models on the meta device, with and without checkpointing), it prints the relative
error of each correct solution (the reference, the independent solution, the alternatives) and
of each mutant that changes `activation_bytes`. A tolerance separates them when the largest error
of a correct solution is well below the error by which the nearest mutant is caught (its largest
error over the suite's cases: one case outside the tolerance fails it).
"""
import sys
import tempfile
from pathlib import Path

COURSE_ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(COURSE_ROOT))

from grader.core.checks import sibling_module       # noqa: E402
from grader.worker.loading import load_module         # noqa: E402
from grader.running.variants import INDEPENDENT, REFERENCE, base_source, variants_of   # noqa: E402
from grader.tasks import task_named                 # noqa: E402

suite = sibling_module(__file__, "test_memory_hidden")
oracles = suite.oracles


def cases():
    """(label, config, batch, seq_len, bytes per value, checkpointing, device) of every measurement."""
    for name in sorted(suite.SMALL):
        for batch, seq_len, size in suite.small_shapes(name):
            for checkpointing in (False, True):
                yield (f"{name} {batch}x{seq_len} b={size}{' ckpt' if checkpointing else ''}", suite.SMALL[name],
                       batch, seq_len, size, checkpointing, "cpu")
    for checkpointing, name, batch, seq_len in ([(False, *c) for c in suite.FULL_SIZE]
                                                + [(True, *c) for c in suite.FULL_SIZE_CHECKPOINTED]):
        yield (f"{name} {batch}x{seq_len}{' ckpt' if checkpointing else ''}", suite.zoo(name), batch, seq_len, 2,
               checkpointing, "meta")


def modules(task):
    """(kind, name, base, module) of the reference and every variant, each loaded from its own source."""
    folder = Path(tempfile.mkdtemp(prefix="margins-"))
    yield "correct", "reference", REFERENCE, load_module(COURSE_ROOT / "solutions" / task.name / f"{task.module}.py")
    for variant in variants_of(task):
        path = folder / f"{variant.name}.py"
        path.write_text(variant.apply(base_source(task, variant.base)), encoding="utf-8")
        kind = "correct" if variant.kind == "alternative" else "mutant"
        name = INDEPENDENT if variant.base == INDEPENDENT and variant.kind == "alternative" else variant.name
        yield kind, name, variant.base, load_module(path)


def errors(module, measured):
    """Relative error of the module's estimate on every case (None where it raises)."""
    found = []
    for (label, config, batch, seq_len, size, checkpointing, _), truth in measured:
        try:
            got = module.activation_bytes(config, batch, seq_len, checkpointing=checkpointing, bytes_per_value=size)
            found.append(got / truth - 1)
        except Exception:            # a mutant may break the function outright: caught, not near
            found.append(None)
    return found


def main():
    task = task_named("04")
    measured = [(case, oracles.saved_bytes(case[1], case[2], case[3], bytes_per_value=case[4], device=case[6],
                                           checkpointing=case[5])) for case in cases()]
    graded = [(kind, name, base, errors(module, measured)) for kind, name, base, module in modules(task)]
    bases = {name: found for _, name, _, found in graded if name in (REFERENCE, INDEPENDENT)}
    rows = [(kind, name, max((abs(e) for e in found if e is not None), default=float("inf")), found)
            for kind, name, base, found in graded
            if kind == "correct" or found != bases[base]]      # mutants that change activation_bytes
    print(f"{'case':32s}" + "".join(f"{name[:14]:>15s}" for kind, name, *_ in rows if kind == "correct"))
    for index, ((label, *_), truth) in enumerate(measured):
        cells = "".join(f"{found[index]:+15.3f}" for kind, _, _, found in rows if kind == "correct")
        print(f"{label:32s}{cells}")
    correct = max(worst for kind, _, worst, _ in rows if kind == "correct")
    print(f"\nlargest error of a correct solution: {correct:.1%} (tolerance {suite.ACTIVATION_TOLERANCE:.0%})")
    print("mutants that change activation_bytes, by the largest error they show:")
    for kind, name, worst, found in sorted((r for r in rows if r[0] == "mutant"), key=lambda r: r[2]):
        inside = worst <= suite.ACTIVATION_TOLERANCE
        print(f"  {name:42s} {worst:8.1%}" + ("  (raises somewhere)" if None in found else "")
              + ("  (within the tolerance: another test catches it)" if inside else ""))


if __name__ == "__main__":
    main()
