"""Where learner code runs, and what holds it there: the levels and the one place a level is
chosen (`levels.resolve`), the `Jail` protocol and its no-jail case, the sandbox, the uid level,
cgroups, and the trusted host of a task's workers. It runs on the trusted side, in the grading
session's process; the jailed side is `grader.worker`."""
