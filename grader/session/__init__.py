"""The pytest side of a grading: the plugin that turns a session's tests into a score report,
the submission proxy through which tests call learner code, the intake of the learner's files,
the seed, and the audit's forks of one collected session. It runs in the grading session's
process; learner code never runs here (`grader.isolation` keeps it in workers)."""
