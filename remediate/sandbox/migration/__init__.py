"""Kafka's ZooKeeper-to-KRaft migration (KIP-866), run on a real-Kafka sandbox the way Kafka's
documentation describes it ("ZooKeeper to KRaft Migration", 3.5 to 3.9):

    1. controller   a KRaft controller (node 3000) with zookeeper.metadata.migration.enable,
                    its storage formatted with ZooKeeper's cluster id, started;
    2. hybrid       the brokers rolled, one at a time, into migration mode (the migration flag,
                    the controller quorum, inter.broker.protocol.version at the release's line);
                    the controller copies ZooKeeper's metadata into KRaft and writes back
                    to ZooKeeper from then on (dual write);
    3. kraft        the brokers rolled, one at a time, into KRaft mode (process.roles=broker);
    4. done         the controller restarted without the migration flag and ZooKeeper.

Each step waits for its event (a log line, a znode, every partition's ISR whole again), and a
step that does not get there fails naming the step and showing the last log lines. Every
process is started and stopped by pid, as the brokers are (remediate/sandbox/cluster.py).

Layout added to the sandbox directory D:

    D/controller-3000/controller.properties, data/, logs/, controller.pid
"""
