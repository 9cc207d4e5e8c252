"""The learner's loop beside the grading: `grader watch` (a warm loop over the visible tests),
`grader hint` (a concept's hint ladder) and `grader progress` (what each run left behind).

Everything here runs the learner's code in-process, for the learner alone: a self-check grades
nothing official. It sits above the grading session (`grader.session`, `grader.isolation`) and
`grader.running`, and is imported by the CLI.
"""
