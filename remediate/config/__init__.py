"""cluster.yaml: the tool's configuration for one cluster, validated, and its loader.

`load_cluster_config(path)` reads the file with yaml.safe_load and returns a frozen
`ClusterConfig`; `parse_cluster_config(data, source=..., base_dir=...)` does the same for data
that is already loaded. Every problem is reported as a `ClusterConfigError` (a `ConfigError`)
whose message has one line per problem, each naming the file, the dotted field path with list
indexes and what was expected there:

    cluster.yaml: brokers[1].log_dirs[0]: expected an absolute path, got 'data'

Local files (ssh keys, known_hosts, TLS files, password files, the journal) are resolved against
the directory that holds cluster.yaml, after `~` is expanded. Paths on the brokers (log dirs,
server.properties, the backup dir) must be absolute, except on brokers with transport local,
which are this machine: there a relative one is taken from cluster.yaml's directory too (for
`backup_dir`, when every broker is local). Secrets (the ZooKeeper password and the ssh
key passphrase) are read from the environment or a file at load time and kept as `SecretStr`:
neither repr(), str(), model_dump() nor model_dump_json() of the configuration shows them, and no
error message prints them.

The package: problems.py (problems and how they are reported), fields.py and paths.py (the
field types), secrets.py (reading secrets), models.py (the models); the loader is here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import yaml
from pydantic import ValidationError

from remediate.config.fields import FrozenStrMap, ValidationContext
from remediate.config.models import (
    BrokerConfig,
    ClusterConfig,
    ClusterTimeouts,
    HooksConfig,
    ServiceConfig,
    ServiceKind,
    SparkConfig,
    SshConfig,
    SshTarget,
    ZooKeeperAuth,
    ZooKeeperConfig,
    ZooKeeperTls,
)
from remediate.config.problems import (
    MAX_REPORTED_PROBLEMS,
    ClusterConfigError,
    ConfigProblem,
    problems_of,
    show,
)
from remediate.config.secrets import MAX_SECRET_BYTES, read_limited

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_REPORTED_PROBLEMS",
    "MAX_SECRET_BYTES",
    "BrokerConfig",
    "ClusterConfig",
    "ClusterConfigError",
    "ClusterTimeouts",
    "ConfigProblem",
    "FrozenStrMap",
    "HooksConfig",
    "ServiceConfig",
    "ServiceKind",
    "SparkConfig",
    "SshConfig",
    "SshTarget",
    "ZooKeeperAuth",
    "ZooKeeperConfig",
    "ZooKeeperTls",
    "load_cluster_config",
    "parse_cluster_config",
]

MAX_FILE_BYTES = 1 << 20  # cluster.yaml is a few hundred bytes; anything this big is a mistake


def parse_cluster_config(
    data: object,
    *,
    source: str,
    base_dir: Path,
    environ: Mapping[str, str] | None = None,
) -> ClusterConfig:
    """Validate already-loaded cluster.yaml data.

    `source` names the file in messages; relative local paths are resolved against `base_dir`;
    secrets named by *_env keys are looked up in `environ` (default: os.environ).
    """
    if not isinstance(data, dict):
        got = "an empty document" if data is None else show(data)
        raise ClusterConfigError(source, [ConfigProblem("", "a mapping at the top level", got)])
    context = ValidationContext(
        source=source,
        base_dir=base_dir.expanduser().absolute(),
        environ=os.environ if environ is None else environ,
    )
    try:
        config = ClusterConfig.model_validate(data, context=context)
    except ValidationError as exc:
        found = problems_of(exc, ClusterConfig)
    else:
        return config
    # Raised outside the except block: the ValidationError, whose text may quote input
    # (secrets included), must not ride along as __context__.
    raise ClusterConfigError(source, found)


def load_cluster_config(path: Path, *, environ: Mapping[str, str] | None = None) -> ClusterConfig:
    """Read, parse and validate cluster.yaml. Every problem raises ClusterConfigError."""
    source = str(path)
    data = _read_yaml(path, source)
    return parse_cluster_config(
        data, source=source, base_dir=Path(path).absolute().parent, environ=environ
    )


def _read_yaml(path: Path, source: str) -> object:
    raw = read_limited(Path(path), MAX_FILE_BYTES)
    if isinstance(raw, str):
        raise ClusterConfigError(source, [ConfigProblem("", raw)])
    if len(raw) > MAX_FILE_BYTES:
        expected = f"a file of at most {MAX_FILE_BYTES} bytes"
        raise ClusterConfigError(source, [ConfigProblem("", expected)])
    problem = None
    try:
        data = yaml.safe_load(raw)
    except yaml.MarkedYAMLError as exc:
        problem = _yaml_problem(exc)
    except yaml.YAMLError as exc:
        reason = getattr(exc, "reason", None) or type(exc).__name__
        problem = ConfigProblem("", f"valid YAML in UTF-8 or UTF-16 ({reason})")
    except RecursionError:
        problem = ConfigProblem("", "YAML that is not nested this deeply")
    except Exception as exc:
        # safe_load's tag constructors (!!int, !!timestamp, ...) raise whatever they meet. The
        # exception's text can quote the document, so only its type is shown.
        problem = ConfigProblem(
            "", f"valid YAML (a value could not be built: {type(exc).__name__})"
        )
    if problem is not None:
        raise ClusterConfigError(source, [problem])
    return data


def _yaml_problem(exc: yaml.MarkedYAMLError) -> ConfigProblem:
    """Position and reason only: the snippet YAML errors carry may show a secret."""
    mark = exc.problem_mark or exc.context_mark
    field = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    reason = exc.problem or exc.context or "syntax error"
    return ConfigProblem(field, f"valid YAML ({reason})")
