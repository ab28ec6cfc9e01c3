"""What doctor decides, on plain data: the ZooKeeper rights from ACLs, the Cluster operations
the moves need, and the exit code of all its findings."""

from __future__ import annotations

import pytest
from kazoo.security import make_digest_acl_credential

from remediate.doctor.checks import operations_finding
from remediate.doctor.model import Diagnosis, Finding, Status
from remediate.doctor.zk_rights import (
    ALL,
    CREATE,
    DELETE,
    READ,
    WRITE,
    Identity,
    Need,
    granted,
    judge,
    needs,
)
from remediate.ports import ZnodeAcl

TOOL = Identity.digest("remediate", "s3cret")
WORLD_ALL = ZnodeAcl(ALL, "world", "anyone")
WORLD_READ = ZnodeAcl(READ, "world", "anyone")


def test_a_digest_identity_is_zookeepers_own_form() -> None:
    assert Identity("digest", make_digest_acl_credential("remediate", "s3cret")) == TOOL
    assert str(TOOL) == "digest:remediate"  # the hash is never shown
    assert str(Identity.sasl("remediate")) == "sasl:remediate"
    assert "world:anyone" in str(Identity())


@pytest.mark.parametrize(
    ("acls", "who", "expected"),
    [
        ([WORLD_ALL], Identity(), (ALL, 0)),
        ([WORLD_READ, ZnodeAcl(ALL, "digest", TOOL.id or "")], TOOL, (ALL, 0)),
        # Another user's digest, or the same name with another password: nothing.
        ([ZnodeAcl(ALL, "digest", make_digest_acl_credential("remediate", "x"))], TOOL, (0, 0)),
        ([ZnodeAcl(ALL, "sasl", "kafka")], Identity.sasl("remediate"), (0, 0)),
        ([ZnodeAcl(READ | WRITE, "sasl", "remediate")], Identity.sasl("remediate"), (3, 0)),
        # An ip: entry may apply: not sure.
        ([WORLD_READ, ZnodeAcl(ALL, "ip", "10.0.0.0/8")], TOOL, (READ, ALL)),
        # Without an identity, only world entries apply.
        ([ZnodeAcl(ALL, "digest", TOOL.id or "")], Identity(), (0, 0)),
    ],
)
def test_granted(acls: list[ZnodeAcl], who: Identity, expected: tuple[int, int]) -> None:
    assert granted(acls, who) == expected


def test_needs_follow_which_of_the_tools_znodes_exist() -> None:
    lock, journal = "/remediate/locks/c", "/remediate/journals/c"
    fresh = needs(
        chroot_root="/", brokers=["1"], topics=["t"], existing={}, lock=lock, journal=journal
    )
    (create,) = [n for n in fresh if n.item == "lock and journal"]
    assert (create.perms, create.paths) == (CREATE, ("/",))
    later = needs(
        chroot_root="/",
        brokers=["1"],
        topics=["t"],
        existing={"/remediate": True, "/remediate/locks": True, lock: True},
        lock=lock,
        journal=journal,
    )
    own, parent = [n for n in later if n.item == "lock and journal"]
    assert (own.perms, own.paths) == (READ | WRITE | CREATE | DELETE, (lock,))
    assert (parent.perms, parent.paths) == (CREATE, ("/remediate",))
    reads = next(n for n in later if n.item == "zookeeper reads")
    assert {"/brokers/ids/1", "/brokers/topics/t", "/config/brokers"} <= set(reads.paths)
    restore = next(n for n in later if n.item == "restore: topic ids")
    assert (restore.perms, restore.paths, restore.missing) == (
        WRITE,
        ("/brokers/topics/t",),
        Status.WARNING,
    )


NEED = Need(
    "restore: topic ids", WRITE, ("/a", "/b", "/gone"), "the restore writes", Status.WARNING
)


@pytest.mark.parametrize(
    ("acls", "status", "said"),
    [
        ({"/a": (WORLD_ALL,), "/b": (WORLD_ALL,), "/gone": None}, Status.OK, "WRITE on 2"),
        (
            {"/a": (WORLD_ALL,), "/b": (WORLD_READ,)},
            Status.WARNING,
            "digest:remediate lacks WRITE on /b: the restore writes",
        ),
        (
            {"/a": (WORLD_READ, ZnodeAcl(WRITE, "ip", "127.0.0.1"))},
            Status.UNKNOWN,
            "only through ip: entries",
        ),
        ({"/gone": None}, Status.OK, "nothing to check yet"),
    ],
)
def test_judge_names_the_znodes_without_the_right(
    acls: dict[str, tuple[ZnodeAcl, ...] | None], status: Status, said: str
) -> None:
    finding = judge(NEED, acls, TOOL)
    assert finding.status is status and said in finding.detail, finding
    if status is Status.WARNING:
        assert "setAcl" in finding.fix


def test_many_znodes_without_the_right_are_counted_past_the_first_five() -> None:
    paths = tuple(f"/t{i}" for i in range(8))
    need = Need("zookeeper reads", READ, paths, "scan reads them", Status.CRITICAL)
    finding = judge(need, dict.fromkeys(paths, ()), TOOL)
    assert finding.status is Status.CRITICAL
    assert "/t0, /t1, /t2, /t3, /t4 and 3 more" in finding.detail


@pytest.mark.parametrize(
    ("statuses", "exit_code"),
    [
        ([], 0),
        ([Status.OK, Status.OK], 0),
        ([Status.OK, Status.WARNING], 1),
        ([Status.WARNING, Status.UNKNOWN], 3),
        ([Status.UNKNOWN, Status.CRITICAL, Status.WARNING], 2),
    ],
)
def test_the_exit_code_is_the_worst_finding(statuses: list[Status], exit_code: int) -> None:
    diagnosis = Diagnosis.of(Finding("x", "cluster", s, "d") for s in statuses)
    assert diagnosis.exit_code == exit_code
    document = diagnosis.to_json()
    assert document["exit_code"] == exit_code and len(document["findings"]) == len(statuses)
    first = diagnosis.lines()[0]
    assert first.startswith(f"doctor {diagnosis.status}"), first


@pytest.mark.parametrize(
    ("granted", "status", "said"),
    [
        (frozenset({"DESCRIBE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "READ"}), "OK", ""),
        (frozenset({"DESCRIBE", "DESCRIBE_CONFIGS"}), "WARNING", "no ALTER, ALTER_CONFIGS"),
        (frozenset({"CLUSTER_ACTION"}), "WARNING", "no DESCRIBE, ALTER, DESCRIBE_CONFIGS, ALTER"),
        (None, "UNKNOWN", "did not tell"),
    ],
)
def test_the_cluster_operations_the_moves_need(
    granted: frozenset[str] | None, status: str, said: str
) -> None:
    finding = operations_finding(granted)
    assert finding.status == status and said in finding.detail, finding
    if status == "WARNING":
        assert finding.fix.startswith("grant the principal")
