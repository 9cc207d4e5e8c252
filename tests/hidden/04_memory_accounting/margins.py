"""The figures behind the activation tolerance of exercise 04's hidden suite. Not a test: it prints
numbers and asserts nothing.

    python tests/hidden/04_memory_accounting/margins.py [SEEDS]      # default 10: seeds 0..9

For every measurement the suite compares `activation_bytes` with at a seed (scaled-down models on
the CPU and full-size zoo models on the meta device, all sized from the seed, with and without
checkpointing), it prints the relative error of each correct solution (the reference, the
independent solution, the alternatives) and of each mutant that changes `activation_bytes`. A
tolerance separates them when the largest error of a correct solution, at every seed, is well
below the error by which the nearest mutant is caught (its largest error over one seed's cases:
one case outside the tolerance fails it), at every seed too.
"""
import sys
import tempfile
from pathlib import Path

COURSE_ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(COURSE_ROOT))

from grader.course import COURSE  # noqa: E402
from grader.running.variants import INDEPENDENT, REFERENCE, base_source, variants_of  # noqa: E402
from grader.suite.checks import sibling_module  # noqa: E402
from grader.worker.loading import load_module  # noqa: E402

suite = sibling_module(__file__, "test_memory_hidden")
oracles = suite.oracles


def cases(seed):
    """(label, config, batch, seq_len, bytes per value, checkpointing, device) of every measurement at a seed."""
    for name in sorted(suite.SMALL):
        for batch, seq_len, size in suite.small_shapes(seed, name):
            for checkpointing in (False, True):
                yield (f"{name} {batch}x{seq_len} b={size}{' ckpt' if checkpointing else ''}",
                       suite.measured_models(seed)[name], batch, seq_len, size, checkpointing, "cpu")
    for checkpointing in (False, True):
        for name, batch, seq_len in suite.full_size_shapes(seed):
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
    for (_, config, batch, seq_len, size, checkpointing, _), truth in measured:
        try:
            got = module.activation_bytes(config, batch, seq_len, checkpointing=checkpointing, bytes_per_value=size)
            found.append(got / truth - 1)
        except Exception:            # a mutant may break the function outright: caught, not near
            found.append(None)
    return found


def at_seed(seed, loaded):
    """(kind, name, largest error over the seed's cases, errors) of the correct solutions and of
    the mutants that change activation_bytes; prints the correct solutions' errors per case."""
    measured = [(case, oracles.saved_bytes(case[1], case[2], case[3], bytes_per_value=case[4], device=case[6],
                                           checkpointing=case[5])) for case in cases(seed)]
    graded = [(kind, name, base, errors(module, measured)) for kind, name, base, module in loaded]
    bases = {name: found for _, name, _, found in graded if name in (REFERENCE, INDEPENDENT)}
    rows = [(kind, name, max((abs(e) for e in found if e is not None), default=float("inf")), found)
            for kind, name, base, found in graded
            if kind == "correct" or found != bases[base]]      # mutants that change activation_bytes
    print(f"\nseed {seed}\n{'case':32s}" + "".join(f"{name[:14]:>15s}" for kind, name, *_ in rows if kind == "correct"))
    for index, ((label, *_), _) in enumerate(measured):
        cells = "".join(f"{found[index]:+15.3f}" for kind, _, _, found in rows if kind == "correct")
        print(f"{label:32s}{cells}")
    return rows


def main():
    seeds = range(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
    loaded = list(modules(COURSE.task_named("04")))
    worst = {}                                   # (kind, name) -> largest error at each seed
    raises = set()
    for seed in seeds:
        for kind, name, largest, found in at_seed(seed, loaded):
            worst.setdefault((kind, name), []).append(largest)
            if None in found:
                raises.add(name)
    correct = max(max(errors_) for (kind, _), errors_ in worst.items() if kind == "correct")
    print(f"\nlargest error of a correct solution over seeds {seeds.start}-{seeds.stop - 1}: {correct:.1%} "
          f"(tolerance {suite.ACTIVATION_TOLERANCE:.0%})")
    print("mutants that change activation_bytes, by the smallest over the seeds of the largest error they show:")
    mutants = sorted(((name, min(e)) for (kind, name), e in worst.items() if kind == "mutant"), key=lambda r: r[1])
    for name, smallest in mutants:
        inside = smallest <= suite.ACTIVATION_TOLERANCE
        print(f"  {name:42s} {smallest:8.1%}" + ("  (raises somewhere)" if name in raises else "")
              + ("  (within the tolerance at some seed: another test catches it)" if inside else ""))


if __name__ == "__main__":
    main()
