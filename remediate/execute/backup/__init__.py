"""Backups on a broker host: the shell scripts (scripts.py), their answers parsed (parse.py,
pure), what a backup is (model.py) and the operations that run them through the Transport
port (operations.py). The names the rest of remediate uses are re-exported here."""

from remediate.execute.backup.model import Backup, BackupEntry, check_member_names
from remediate.execute.backup.operations import (
    backup_files,
    delete_backed_up,
    restore_backup,
    verify_backup,
)
from remediate.execute.backup.parse import parse_manifest, parse_tar_listing

__all__ = [
    "Backup",
    "BackupEntry",
    "backup_files",
    "check_member_names",
    "delete_backed_up",
    "parse_manifest",
    "parse_tar_listing",
    "restore_backup",
    "verify_backup",
]
