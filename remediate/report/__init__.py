"""The run report: a run's journal turned into one self-contained HTML page (a timeline
picture, the health samples under it, the plan, approvals, gate decisions and backups) or into
markdown for a change ticket.

`model` reads the journal records, `timeline` and `summary` turn the model into what is drawn
and written, `chart`, `html` and `markdown` render it; only `files` reads and writes files.
"""
