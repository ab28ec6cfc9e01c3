"""The exit codes every command shares (README.md, "Exit codes"). 0 to 3 are the findings'
(scan/findings.py: OK, WARNING, CRITICAL, UNKNOWN); 4 to 6 are what a plan or a run did."""

EXIT_UNKNOWN = 3
EXIT_REFUSED = 4  # refused, nothing changed
EXIT_HALTED = 5  # halted part-way; the journal says where
# The plan is ready but makes partitions unavailable that are available now: nothing was
# changed, and it goes ahead only once someone accepts that (--accept-unavailable, or the
# plan's digest approved). Not 4: a refused plan means escalate, this one means review.
EXIT_NEEDS_ACCEPTANCE = 6
