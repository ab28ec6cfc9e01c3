"""Whether the tool's ZooKeeper identity has the rights each command needs, from the znodes'
ACLs (docs/configuration.md, "ZooKeeper's rights"). Pure: the ACLs are read elsewhere.

An ACL entry applies to the tool when it is `world:anyone`, or names the identity the tool
logs in with (`digest:<user>:<hash>`, `sasl:<user>`). An `ip:` entry may or may not apply (the
address ZooKeeper sees is not known here): a right only such an entry grants is UNKNOWN. A
ZooKeeper super user passes every check on the server whatever the ACLs say, which cannot be
seen from here either: doctor then reports what the ACLs alone give.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kazoo.security import make_digest_acl_credential

from remediate.doctor.model import Finding, Status
from remediate.ports import ZnodeAcl

READ, WRITE, CREATE, DELETE, ADMIN = 1, 2, 4, 8, 16
ALL = READ | WRITE | CREATE | DELETE | ADMIN
_NAMES = ((READ, "READ"), (WRITE, "WRITE"), (CREATE, "CREATE"), (DELETE, "DELETE"))
SHOWN = 5  # znodes named in a finding; the rest counted
CRIT = Status.CRITICAL


def perm_names(perms: int) -> str:
    return ", ".join(name for bit, name in _NAMES if perms & bit) or "none"


@dataclass(frozen=True)
class Identity:
    """Who the tool is to ZooKeeper: scheme and id as ACLs name it (None: nobody, `world`)."""

    scheme: str | None = None
    id: str | None = None

    @classmethod
    def digest(cls, username: str, password: str) -> Identity:
        # ZooKeeper's own form of a digest identity: user:base64(sha1(user:password)).
        return cls("digest", make_digest_acl_credential(username, password))

    @classmethod
    def sasl(cls, username: str) -> Identity:
        return cls("sasl", username)

    def __str__(self) -> str:
        if self.scheme is None:
            return "world:anyone (no zookeeper.auth)"
        shown = self.id.split(":", 1)[0] if self.scheme == "digest" and self.id else self.id
        return f"{self.scheme}:{shown}"


def granted(acls: Sequence[ZnodeAcl], who: Identity) -> tuple[int, int]:
    """The rights the ACL surely gives `who`, and those it may give (through `ip:` entries)."""
    sure = maybe = 0
    for entry in acls:
        if (entry.scheme, entry.id) == ("world", "anyone") or (
            who.scheme is not None and (entry.scheme, entry.id) == (who.scheme, who.id)
        ):
            sure |= entry.perms
        elif entry.scheme == "ip":
            maybe |= entry.perms
    return sure, maybe


@dataclass(frozen=True)
class Need:
    """`perms` on each of `paths`, for `purpose`; without them: `missing` (CRITICAL when every
    run needs them, WARNING when one repair would be refused)."""

    item: str
    perms: int
    paths: tuple[str, ...]
    purpose: str
    missing: Status


def needs(
    *,
    chroot_root: str,
    brokers: Sequence[str],
    topics: Sequence[str],
    existing: Mapping[str, bool],
    lock: str,
    journal: str,
) -> list[Need]:
    """What the commands need, given which of the tool's own znodes exist (`existing`: path ->
    whether it exists, for the lock's and journal's paths and their ancestors)."""
    reads = [
        "/brokers/ids",
        *(f"/brokers/ids/{b}" for b in brokers),
        "/brokers/topics",
        *(f"/brokers/topics/{t}" for t in topics),
        "/config/topics",
        "/config/brokers",
        "/controller_epoch",
    ]
    own: list[str] = []
    create: list[str] = []
    for path in (lock, journal):
        if existing.get(path):
            own.append(path)
            continue
        parent = path
        while parent != "/" and not existing.get(parent):
            parent = parent.rsplit("/", 1)[0] or "/"
        create.append(parent if parent != "/" else chroot_root)
    found = [
        Need(
            "zookeeper reads", READ, tuple(reads), "scan, check and plan read them", Status.CRITICAL
        ),
    ]
    if own:
        found.append(
            Need(
                "lock and journal",
                READ | WRITE | CREATE | DELETE,
                tuple(own),
                "every run locks the cluster and keeps its journal's copy there",
                Status.CRITICAL,
            )
        )
    if create:
        found.append(
            Need(
                "lock and journal",
                CREATE,
                tuple(dict.fromkeys(create)),
                "the first run creates its lock and journal znodes under it",
                Status.CRITICAL,
            )
        )
    found.append(
        Need(
            "restore: topic ids",
            WRITE,
            tuple(f"/brokers/topics/{t}" for t in topics),
            "the restore writes a topic's id back (without it, the restore is refused)",
            Status.WARNING,
        )
    )
    found.append(
        Need(
            "restore: election",
            DELETE,
            (chroot_root,),
            "the restore's controller election deletes /controller through its parent",
            Status.WARNING,
        )
    )
    return found


def judge(need: Need, acls: Mapping[str, tuple[ZnodeAcl, ...] | None], who: Identity) -> Finding:
    """One finding for `need`: OK, or which znodes lack which rights and how to give them."""
    short: list[str] = []
    unsure: list[str] = []
    checked = 0
    for path in need.paths:
        entries = acls.get(path)
        if entries is None:  # gone meanwhile, or never there (no /controller_epoch yet)
            continue
        checked += 1
        sure, maybe = granted(entries, who)
        if sure & need.perms == need.perms:
            continue
        (unsure if (sure | maybe) & need.perms == need.perms else short).append(path)
    rights = perm_names(need.perms)
    where = "cluster"
    if short:
        named = ", ".join(short[:SHOWN]) + (
            f" and {len(short) - SHOWN} more" if len(short) > SHOWN else ""
        )
        fix = (
            f"give {who} {rights} there (ZooKeeper's setAcl, keeping the entries already there),"
            ' or log in as an identity that has them; docs/configuration.md, "ZooKeeper\'s rights"'
        )
        return Finding(
            need.item, where, need.missing, f"{who} lacks {rights} on {named}: {need.purpose}", fix
        )
    if unsure:
        return Finding(
            need.item,
            where,
            Status.UNKNOWN,
            f"{rights} on {', '.join(unsure[:SHOWN])} only through ip: entries, whose address"
            f" match cannot be told from here: {need.purpose}",
        )
    if not checked:
        return Finding(need.item, where, Status.OK, f"nothing to check yet: {need.purpose}")
    return Finding(need.item, where, Status.OK, f"{who} has {rights} on {checked} znode(s)")
