"""Collect (read-only): what ZooKeeper holds and what every broker has on disk."""
