"""The sandbox: an emulated ZooKeeper-mode Kafka cluster on a real ZooKeeper."""
