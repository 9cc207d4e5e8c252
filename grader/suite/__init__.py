"""The suite author's API: what the hidden and visible suites import to grade (assertions that
say what differs and which README section to reread, safe reads of the learner's files, the
figure reader, what a test declares about itself). It runs in the grading session's process."""
