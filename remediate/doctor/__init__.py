"""`remediate doctor`: before an incident, whether everything a run will need is in place, per
item and per broker, with what is missing and how to fix it. Read-only: it stops, starts and
writes nothing (sudo is asked with `sudo -n -l`, which runs nothing; the status command is the
only service command it runs)."""
