"""The sandbox: a ZooKeeper-mode Kafka cluster on this machine, on a real ZooKeeper, for the
demo, the tests and trying the tool out. Its rooms:

- this package's own modules: the sandbox as a whole, whichever brokers it runs: its layout,
  `up`/`down` and `cluster.yaml` (cluster.py), admin steps (admin.py; admin_port.py, the
  tool's Kafka admin port on emulated brokers), the pre-2.8 client's writes
  (legacy_admin.py), a producer and a consumer (clients.py, records.py), acks=all traffic
  while a repair runs (traffic.py) and the incident (reproduce.py);
- emulated/: the emulated brokers, one Python process each, following Kafka's source;
- real/: real Apache Kafka from Maven Central's jars (the releases, the jar cache, the JVM
  broker's settings and command line, confluent-kafka as the client);
- migration/: Kafka's ZooKeeper-to-KRaft migration run on a real-Kafka sandbox;
- plumbing/: what every room starts and stops: processes by pid, ZooKeeper, sshd.

The rooms import from the plumbing and from `records`, never from each other, except that the
migration runs real Kafka; this package's own modules may import any room
(tests/test_imports.py holds them to it).
"""
