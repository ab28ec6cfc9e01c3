"""Playbooks: reviewed, versioned procedures, validated when loaded.

A playbook names the files and partitions it acts on, the brokers it applies to, and its
steps from a small fixed vocabulary; the executor interprets the vocabulary and runs nothing
from a playbook as free text. The shipped playbooks live in `remediate/playbooks/`, package
data of the wheel.
"""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from remediate.config import ClusterConfig, ClusterTimeouts
from remediate.config.fields import MAX_IN_SYNC_S, MAX_SERVICE_COMMAND_S, MAX_START_S, MAX_STOP_S
from remediate.errors import ConfigError
from remediate.formats.logdir import INTERNAL_TOPICS, LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA
from remediate.scan.kinds import FindingKind


class Action(StrEnum):
    """The vocabulary: every step a playbook may list, as the playbook, the plan and the
    journal's step keys write it ("verb" or "verb argument")."""

    # The steps of a restart, in the order a playbook may list them.
    GATE_RESTART_SAFETY = "gate restart-safety"
    STOP = "stop"
    BACKUP = "backup"
    DELETE = "delete"
    START = "start"
    WAIT_REGISTERED = "wait registered"
    WAIT_IN_SYNC = "wait in-sync"
    VERIFY_TOPIC_IDS = "verify topic-ids"
    # The steps of a restore (ZooKeeper's topic id written back; no broker restarts).
    GATE_AGREEMENT = "gate agreement"
    ZK_WRITE_TOPIC_ID = "zk-write topic-id"
    ZK_WRITE_CONTROLLER_ELECTION = "zk-write controller-election"
    # The steps of a move (replicas to another log dir of their broker; no restart), then
    # the trigger (each partition reassigned to its own replicas).
    GATE_MOVE_SAFETY = "gate move-safety"
    # The copy's throttle (replica.alter.log.dirs.io.max.bytes.per.second on each broker that
    # moves replicas), when the plan has one: set before the moves, put back after them.
    THROTTLE_SET = "throttle set"
    MOVE_REPLICAS = "move replicas"
    WAIT_MOVED = "wait moved"
    THROTTLE_REMOVE = "throttle remove"
    GATE_SWAPPED = "gate swapped"
    TRIGGER_REASSIGNMENT = "trigger reassignment"

    @property
    def verb(self) -> str:
        return self.value.partition(" ")[0]

    @property
    def argument(self) -> str | None:
        return self.value.partition(" ")[2] or None


VERBS = tuple(dict.fromkeys(action.verb for action in Action))
Verb = Literal[VERBS]  # type: ignore[valid-type]
# Each verb and the arguments it takes (None: none).
ARGUMENTS: dict[str, frozenset[str] | None] = {
    verb: frozenset(a.argument for a in Action if a.verb == verb and a.argument) or None
    for verb in VERBS
}
ALLOWED_FILES = (PARTITION_METADATA, LEADER_EPOCH_CHECKPOINT)
# The kinds a playbook may act on (`applies_to`), as the strings its YAML names them by.
FINDING_KINDS = tuple(
    kind.value
    for kind in (
        FindingKind.TOPIC_ID_MISMATCH,
        FindingKind.TOPIC_ID_MISMATCH_OUT_OF_ISR,
        FindingKind.METADATA_CORRUPT,
        FindingKind.METADATA_MISSING,
        FindingKind.ZK_TOPIC_ID_MISSING,
    )
)


class Step(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    verb: Verb
    argument: str | None = None

    def __str__(self) -> str:
        return self.verb if self.argument is None else f"{self.verb} {self.argument}"

    @property
    def action(self) -> Action:
        return Action(str(self))

    @model_validator(mode="after")
    def _known_argument(self) -> Step:
        # Checked here, not by the playbook, so that the error names the step (`steps.3`).
        _check_argument(self)
        return self


def _step(value: object) -> object:
    """`stop` or `{wait: in-sync}` in YAML; a Step here."""
    if isinstance(value, str):
        return {"verb": value}
    if isinstance(value, dict) and len(value) == 1:
        ((verb, argument),) = value.items()
        return {"verb": verb, "argument": argument}
    return value


class Timeouts(BaseModel):
    """The gate parameters of a playbook (its YAML key and the plan's JSON key: `gates`).

    cluster.yaml's `timeouts` section overrides the four timeouts (`with_cluster`); the plan
    records the values in effect, and a run uses what its plan recorded."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    stability_window_s: Annotated[float, Field(ge=0, le=3600)] = 10.0
    stop_timeout_s: Annotated[float, Field(gt=0, le=MAX_STOP_S)] = 120.0
    # How long a started broker may take to register; extended while its own log shows its
    # logs loading (remediate/execute/startwait.py).
    start_timeout_s: Annotated[float, Field(gt=0, le=MAX_START_S)] = 180.0
    in_sync_timeout_s: Annotated[float, Field(gt=0, le=MAX_IN_SYNC_S)] = 300.0
    max_brokers_per_run: Annotated[int, Field(ge=0)] = 0
    expected_restart_s: Annotated[float, Field(ge=0, le=86400)] = 60.0
    # How long each service command (stop, start, status) may run on a broker's host.
    service_command_timeout_s: Annotated[float, Field(gt=0, le=MAX_SERVICE_COMMAND_S)] = 300.0

    def with_cluster(self, cluster: ClusterTimeouts | None) -> Timeouts:
        """These gates with the timeouts cluster.yaml sets in their place."""
        if cluster is None:
            return self
        given = {
            "stop_timeout_s": cluster.stop_s,
            "start_timeout_s": cluster.start_s,
            "in_sync_timeout_s": cluster.in_sync_s,
            "service_command_timeout_s": cluster.service_command_s,
        }
        updates = {name: value for name, value in given.items() if value is not None}
        return Timeouts.model_validate({**self.model_dump(), **updates}) if updates else self


class Playbook(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")]
    version: int = Field(ge=1)
    description: str = Field(min_length=1)
    brokers: Literal["needing-fix", "all"] = "needing-fix"
    applies_to: tuple[Literal[FINDING_KINDS], ...] = ()  # type: ignore[valid-type]
    files: tuple[Literal[ALLOWED_FILES], ...] = ()  # type: ignore[valid-type]
    scope: Literal["affected", "all"] = "affected"
    exclude_topics: tuple[str, ...] = tuple(sorted(INTERNAL_TOPICS))
    steps: tuple[Annotated[Step, BeforeValidator(_step)], ...] = Field(min_length=1)
    gates: Timeouts = Timeouts()

    def with_cluster(self, cluster: ClusterTimeouts | None) -> Playbook:
        """This playbook with the timeouts cluster.yaml sets (its `timeouts` section)."""
        gates = self.gates.with_cluster(cluster)
        return self if gates is self.gates else self.model_copy(update={"gates": gates})

    @model_validator(mode="after")
    def _coherent(self) -> Playbook:
        _check_order([s.verb for s in self.steps], bool(self.files))
        actions = [str(s) for s in self.steps]
        if (
            Action.THROTTLE_SET in actions
            and Action.THROTTLE_REMOVE not in actions[actions.index(Action.THROTTLE_SET) :]
        ):
            raise ValueError("a throttle that is set must be removed: 'throttle: remove' after it")
        if self.brokers == "needing-fix" and not self.applies_to:
            raise ValueError("'brokers: needing-fix' needs 'applies_to' finding kinds")
        return self


def _check_argument(step: Step) -> None:
    allowed = ARGUMENTS[step.verb]
    if allowed is None and step.argument is not None:
        raise ValueError(f"step {step.verb!r} takes no argument, got {step.argument!r}")
    if allowed is not None and step.argument not in allowed:
        raise ValueError(
            f"step {step.verb!r} needs one of {sorted(allowed)}, got {step.argument!r}"
        )


def _check_order(verbs: list[str], has_files: bool) -> None:
    """The safety rules of a procedure: gate before stop, stop before any file change, backup
    before delete, and the broker started again."""
    if "delete" in verbs:
        if not has_files:
            raise ValueError("a playbook that deletes must list its files")
        if "backup" not in verbs or verbs.index("backup") > verbs.index("delete"):
            raise ValueError(
                "'delete' must come after 'backup': nothing is deleted without a backup"
            )
    for verb in ("backup", "delete"):
        if verb not in verbs:
            continue
        if "stop" not in verbs or verbs.index("stop") > verbs.index(verb):
            raise ValueError(
                f"{verb!r} must come after 'stop': files change only on a stopped broker"
            )
        if "start" not in verbs or verbs.index("start") < verbs.index(verb):
            raise ValueError(f"'start' must follow {verb!r}")
    if "move" in verbs and "gate" not in verbs[: verbs.index("move")]:
        raise ValueError("a 'gate' must come before 'move'")
    if "stop" in verbs:
        stop = verbs.index("stop")
        if "gate" not in verbs[:stop]:
            raise ValueError("a 'gate' must come before 'stop'")
        if "start" not in verbs[stop:]:
            raise ValueError("a playbook that stops a broker must start it again")


SEARCH_ENV = "REMEDIATE_PLAYBOOKS"


def search_path() -> list[Path]:
    """Where playbooks are found by name: $REMEDIATE_PLAYBOOKS, the project, the install."""
    paths = [Path(p) for p in os.environ.get(SEARCH_ENV, "").split(os.pathsep) if p]
    # Shipped inside the package, so found however it is installed (a venv, --user,
    # --prefix, a checkout).
    paths.append(Path(__file__).resolve().parent / "playbooks")
    return paths


def available() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for directory in search_path():
        if directory.is_dir():
            for path in sorted(directory.glob("*.yaml")):
                found.setdefault(path.stem, path)
    return found


def parse_playbook(data: object, *, source: str) -> Playbook:
    try:
        return Playbook.model_validate(data)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error["loc"]) or "(top level)"
            lines.append(f"{source}: {where}: {error['msg']}")
        raise ConfigError("\n".join(lines)) from None


def load_playbook(name_or_path: str) -> Playbook:
    """A playbook by name (`topicid-mismatch`) or by path to a YAML file."""
    path = Path(name_or_path)
    if not (path.suffix in (".yaml", ".yml") or os.sep in name_or_path):
        known = available()
        if name_or_path not in known:
            names = ", ".join(sorted(known)) or "none"
            searched = ", ".join(str(p) for p in search_path())
            raise ConfigError(
                f"no playbook named {name_or_path!r}; available: {names} (searched {searched})"
            )
        path = known[name_or_path]
    try:
        data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    playbook = parse_playbook(data, source=str(path))
    if path.stem != playbook.name:
        raise ConfigError(
            f"{path}: name: expected {path.stem!r} (the file's name), got {playbook.name!r}"
        )
    return playbook


def cluster_playbook(config: ClusterConfig, name_or_path: str) -> Playbook:
    """A playbook as it runs on `config`'s cluster: its timeouts where cluster.yaml sets them."""
    return load_playbook(name_or_path).with_cluster(config.timeouts)
