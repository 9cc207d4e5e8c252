"""How the grader's trusted processes start children and share the box: one way to fork a
child and see it end (`forks`), and the slots that sessions forking at once share (`slots`)."""
