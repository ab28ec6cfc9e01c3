"""The exit codes every command shares (README.md, "Exit codes"). 0 to 3 are the findings'
(scan/findings.py: OK, WARNING, CRITICAL, UNKNOWN); 4 and 5 are what a run did."""

EXIT_UNKNOWN = 3
EXIT_REFUSED = 4  # refused, nothing changed
EXIT_HALTED = 5  # halted part-way; the journal says where
