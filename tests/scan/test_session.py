"""The scan's Spark session in the background: when it warms up on the sample, and that a
warm-up never holds the real classification back."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from remediate.errors import SparkNotInstalledError
from remediate.scan import archive, session


@pytest.mark.parametrize(
    ("collected", "idle", "blocker"),
    [
        (False, 0.9, None),
        (False, None, None),  # no /proc/stat: nothing says the machine is busy
        (False, 0.5, None),
        (False, 0.2, "busy (20% idle)"),
        (True, 0.9, "the snapshot is ready"),
        (True, 0.0, "the snapshot is ready"),
    ],
)
def test_when_to_warm_up(collected: bool, idle: float | None, blocker: str | None) -> None:
    reason = session.warm_up_blocker(collected=collected, idle=idle)
    if blocker is None:
        assert reason is None
    else:
        assert reason is not None and blocker in reason


def test_the_idle_share_is_a_share() -> None:
    share = session.idle_share(0.05)
    assert share is not None  # Linux
    assert 0.0 <= share <= 1.0


def test_without_pyspark_a_spark_session_is_refused_before_it_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where PySpark is not installed, a session is refused at once (before the caller reads
    the cluster), in one line naming the extra; no thread is started."""
    monkeypatch.setattr(archive, "spark_home", lambda: None)  # session.py's `cds`
    for start in (session.BackgroundSession, session.spark_session):
        with pytest.raises(SparkNotInstalledError) as refused:
            start()
        said = str(refused.value)
        assert "\n" not in said and "pip install 'kafka-topicid-remediate[spark]'" in said


# Each case in a process of its own: a BackgroundSession starts and stops its own SparkContext.
CASES = """
import json, sys, tempfile, threading
from pathlib import Path
from remediate.scan import session
from remediate.scan.scanner import classify_snapshots
from remediate.scan.warmup import write_sample

case = sys.argv[1]
started, finished = threading.Event(), threading.Event()
real_warm_up = session.warm_up

def watched(spark, stop=None):
    started.set()
    try:
        real_warm_up(spark, stop)
    finally:
        finished.set()

decided = threading.Event()
decisions = []
real_blocker = session.warm_up_blocker

def blocker(**facts):
    decisions.append(real_blocker(**facts))
    decided.set()
    return decisions[-1]

session.warm_up = watched
session.warm_up_blocker = blocker
session.idle_share = lambda sample_s=0.2: 1.0 if case != "busy" else 0.1
background = session.BackgroundSession("local[1]", warm=True)
if case == "collected-first":
    background.collected()
elif case == "cancelled":
    started.wait(120)
    background.collected()
elif case == "busy":
    decided.wait(120)
spark = background.get()
waited_for_warm_up = finished.is_set()
with tempfile.TemporaryDirectory() as tmp:
    report, _ = classify_snapshots(spark, [write_sample(Path(tmp) / "s")])
background.close()
print(json.dumps({
    "warmed": started.is_set(),
    "finished": finished.is_set(),
    "decisions": decisions,
    "kinds": sorted({f.kind.value for f in report.findings}),
}))
"""


def run_case(case: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", CASES, case], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)  # type: ignore[no-any-return]


ALL_KINDS = [
    "BROKER_UNREACHABLE",
    "LEADER_FENCED_BY_STALE_ID",
    "METADATA_CORRUPT",
    "METADATA_MISSING",
    "OK",
    "ORPHAN_DIR",
    "PARTITION_OFFLINE",
    "REPLICA_DIR_MISSING",
    "TOPIC_ID_MISMATCH",
    "TOPIC_ID_MISMATCH_OUT_OF_ISR",
    "ZK_TOPIC_ID_MISSING",
]


FOUND = [k for k in ALL_KINDS if k != "OK"]  # the sample's findings; OK ones are counted


def test_a_snapshot_ready_before_the_session_is_never_held_back() -> None:
    result = run_case("collected-first")
    assert result == {"warmed": False, "finished": False, "decisions": [], "kinds": FOUND}


def test_a_warm_up_under_way_is_stopped_and_the_session_still_classifies() -> None:
    result = run_case("cancelled")
    assert result["decisions"] == [None]
    assert result["warmed"] is True and result["finished"] is True
    assert result["kinds"] == FOUND


def test_a_busy_machine_is_not_warmed_up_on() -> None:
    result = run_case("busy")
    assert result["warmed"] is False
    decisions = result["decisions"]
    assert isinstance(decisions, list) and len(decisions) == 1 and "busy" in decisions[0]
    assert result["kinds"] == FOUND
