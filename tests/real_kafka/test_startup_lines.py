"""When the sandbox takes a real broker's startup to be over (jvm_broker.started), on the
server.logs recorded from real Kafka 2.8.2 and 3.4.1 (tests/formats/data/log_loading/): after
a SIGKILL the killed process's `started` is no longer the last word once the new process has
logged `starting`, which Kafka logs without the `[KafkaServer id=N] ` prefix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from remediate.sandbox.real import jvm_broker
from tests.formats.logloading_recordings import DATA, KINDS

# The moments of each recording (logloading_recordings.cuts) and whether the startup is over.
OVER = {
    "the first run, the broker killed: its last lines": True,
    "started again after SIGKILL: `starting`, nothing loaded yet": False,
    "recovering its first log dir": False,
    "every log loaded": False,
    "started": True,
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("moment", sorted(OVER))
def test_a_start_is_over_only_once_the_new_process_says_started(
    tmp_path: Path, kind: str, moment: str
) -> None:
    recording = json.loads((DATA / f"{kind}.json").read_text())
    (cut,) = [c for c in recording["cuts"] if c["moment"] == moment]
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "server.log").write_text("\n".join(recording["lines"][: cut["lines"]]) + "\n")
    assert jvm_broker.started(logs) is OVER[moment]
