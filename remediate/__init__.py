"""remediate: finds and repairs topic-id inconsistency on ZooKeeper-mode Kafka clusters."""

__version__ = "0.1.0.dev0"
