"""The score report's schema (`report`) and its run record (`record`): what a grading produces,
typed from write to read. The ground floor: it imports nothing of `grader` but the course and the
worker's `Location`; `grader.reports` renders it, and everything else reads and writes it here."""
