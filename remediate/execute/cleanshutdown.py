"""Kafka's clean-shutdown marker: a broker that stopped cleanly leaves `.kafka_cleanshutdown`
in each of its log dirs (LogManager.shutdown); at its next start, a log dir without it has
its logs recovered (every segment after the recovery point checked and rebuilt), which can
take minutes on a large broker. The stop of a restart step reads the markers so that the
journal says which start will be slow, and why. Pure, but for the command it builds."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

from remediate.formats.logdir import CLEAN_SHUTDOWN

# Reading a few file names: seconds at most, even over a slow ssh.
MARKER_TIMEOUT_S = 30.0

CLEAN, UNCLEAN = "clean", "unclean"


def marker_script(log_dirs: Sequence[str]) -> str:
    """One line per log dir, in order: "clean" when its marker is there, else "unclean".
    Each path reaches the shell only as a quoted word."""
    return "; ".join(
        f"if [ -e {shlex.quote(d.rstrip('/') + '/' + CLEAN_SHUTDOWN)} ];"
        f" then echo {CLEAN}; else echo {UNCLEAN}; fi"
        for d in log_dirs
    )


def read_markers(log_dirs: Sequence[str], stdout: str) -> dict[str, bool] | None:
    """Per log dir, whether its marker was there; None when the output is not one answer
    per log dir."""
    answers = stdout.split()
    if len(answers) != len(log_dirs) or any(a not in (CLEAN, UNCLEAN) for a in answers):
        return None
    return {d: a == CLEAN for d, a in zip(log_dirs, answers, strict=True)}


def recovery_note(broker: int, clean: Mapping[str, bool], start_timeout_s: float) -> str | None:
    """What the journal says of a broker that did not stop cleanly; None if it did."""
    unclean = sorted(d for d, ok in clean.items() if not ok)
    if not unclean:
        return None
    return (
        f"broker {broker} did not shut down cleanly: no {CLEAN_SHUTDOWN} in"
        f" {', '.join(unclean)}; Kafka recovers those logs at its start, so expect a slow start:"
        f" the wait for it ({start_timeout_s:.0f} s) is extended while its server.log shows"
        " the logs loading"
    )
