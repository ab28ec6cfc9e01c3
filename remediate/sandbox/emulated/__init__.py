"""The emulated brokers: one Python process per broker (`python -m
remediate.sandbox.emulated.broker`), following Kafka's source with Kafka's znode and log-dir
formats: controller election and topic-id assignment (controller.py), replication, the ISR and
the topic-id check (replica.py), the logs on disk (storage.py, log_dir_move.py), the
sandbox's own request protocol (wire.py) with its client (client.py), and the broker's
settings (config.py)."""
