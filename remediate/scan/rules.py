"""The classification rules, written once in Spark SQL: snapshot tables in, one finding per
replica (and per topic, partition and broker where README.md says so) out, plus a per-broker
summary. Spark runs them as they are (remediate/scan/job.py); the embedded engine runs the same
query transpiled to DuckDB's dialect (remediate/scan/duck.py).

Every snapshot row carries its cluster's name, so the same query classifies one snapshot or a
whole fleet of them. The rules, in the order they apply to an assigned replica on a broker
whose disk was inspected:

    no directory for it                      REPLICA_DIR_MISSING
    no partition.metadata                    METADATA_MISSING
    a file Kafka would not parse             METADATA_CORRUPT
    ZooKeeper has no id, or the ids agree    OK
    ids differ, broker in the ISR            TOPIC_ID_MISMATCH
    ids differ, broker not in the ISR        TOPIC_ID_MISMATCH_OUT_OF_ISR

and, per partition, LEADER_FENCED_BY_STALE_ID when ZooKeeper's leader holds another id than
ZooKeeper and has not taken ZooKeeper's current leader epoch (`stale_leaders`).
"""

from __future__ import annotations

from remediate.scan.kinds import FindingKind as K

# Every snapshot table's columns with their Spark SQL types (remediate/collect/snapshot.py
# writes them). Both engines read the tables with exactly these columns, nothing inferred.
TABLE_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "brokers": (
        ("cluster", "STRING"),
        ("broker", "INT"),
        ("host", "STRING"),
        ("configured", "BOOLEAN"),
        ("registered", "BOOLEAN"),
        ("broker_epoch", "BIGINT"),
        ("rack", "STRING"),
        ("is_controller", "BOOLEAN"),
        ("reachable", "BOOLEAN"),
        ("error", "STRING"),
        ("state_change_log", "STRING"),
    ),
    "topics": (
        ("cluster", "STRING"),
        ("topic", "STRING"),
        ("zk_topic_id", "STRING"),
        ("znode_version", "INT"),
        ("data_version", "INT"),
        ("partition_count", "INT"),
        ("min_isr", "INT"),
        ("topic_mzxid", "BIGINT"),
    ),
    "assignments": (
        ("cluster", "STRING"),
        ("topic", "STRING"),
        ("partition", "INT"),
        ("broker", "INT"),
        ("position", "INT"),
        ("topic_mzxid", "BIGINT"),
    ),
    "states": (
        ("cluster", "STRING"),
        ("topic", "STRING"),
        ("partition", "INT"),
        ("leader", "INT"),
        ("leader_epoch", "INT"),
        ("isr", "ARRAY<INT>"),
        ("zk_version", "INT"),
        ("controller_epoch", "INT"),
        ("mzxid", "BIGINT"),
    ),
    "topic_configs": (
        ("cluster", "STRING"),
        ("topic", "STRING"),
        ("key", "STRING"),
        ("value", "STRING"),
    ),
    "log_dirs": (
        ("cluster", "STRING"),
        ("broker", "INT"),
        ("log_dir", "STRING"),
        ("state", "STRING"),
    ),
    "replicas": (
        ("cluster", "STRING"),
        ("broker", "INT"),
        ("log_dir", "STRING"),
        ("dir", "STRING"),
        ("dir_hex", "STRING"),
        ("topic", "STRING"),
        ("partition", "INT"),
        ("dir_kind", "STRING"),
        ("name_problem", "STRING"),
        ("metadata_state", "STRING"),
        ("file_topic_id", "STRING"),
        ("metadata_problem", "STRING"),
        ("epoch_latest", "INT"),
    ),
    "rejections": (
        ("cluster", "STRING"),
        ("broker", "INT"),
        ("topic", "STRING"),
        ("partition", "INT"),
        ("memory_topic_id", "STRING"),
        ("request_topic_id", "STRING"),
        ("logged_at", "STRING"),
        ("wording", "STRING"),
    ),
}
# Snapshots written before these tables existed are read as if they were empty.
OPTIONAL_TABLES = frozenset({"rejections"})


BASE_COLUMNS = (
    "cluster, kind, broker, topic, partition, file_topic_id, zk_topic_id, in_isr,"
    " log_dir, dir, detail"
)
FINDING_COLUMNS = f"{BASE_COLUMNS}, evidence"
NO_EVIDENCE = f"{BASE_COLUMNS}, CAST(NULL AS STRING) AS evidence"

# The SQL is assembled from constants only (the kinds from FindingKind); no input reaches it.
#
# Two steps. FACTS_SQL is the one pass over the big tables: every assigned replica and every
# directory found are matched in one join (`matched`), ZooKeeper's facts about each are looked
# up in the small tables, and each replica gets its finding. Its result is kept (the `facts`
# table: Spark checkpoints it, DuckDB stores it) so that CLASSIFY_SQL's rules, which read it
# three times, never read the snapshot's big tables again. The rules as first written each
# joined the big tables anew; tests/scan/test_rules_oracle.py holds these two to that query.
FACTS_SQL = f"""
WITH dirs AS (
    -- A live, well-named partition directory is `usable`; `copy` numbers a broker's usable
    -- directories of one partition by log dir (the rules read the first; a second copy in
    -- another log dir is neither a replica's nor an orphan), then the unusable ones.
    SELECT r.*,
           coalesce(dir_kind = 'live' AND topic IS NOT NULL AND name_problem IS NULL, false)
               AS usable,
           row_number() OVER (
               PARTITION BY cluster, broker, topic, partition
               ORDER BY CASE WHEN dir_kind = 'live' AND topic IS NOT NULL
                                  AND name_problem IS NULL THEN 0 ELSE 1 END,
                        log_dir) AS copy
    FROM replicas r
),
matched AS (
    SELECT coalesce(a.cluster, d.cluster) AS cluster, coalesce(a.broker, d.broker) AS broker,
           coalesce(a.topic, d.topic) AS topic, coalesce(a.partition, d.partition) AS partition,
           a.broker IS NOT NULL AS assigned, d.broker IS NOT NULL AS found,
           coalesce(d.usable, false) AS usable, d.copy, d.dir_kind, d.name_problem, d.log_dir,
           d.dir, d.metadata_state, d.file_topic_id, d.metadata_problem, d.epoch_latest
    FROM assignments a
    FULL OUTER JOIN dirs d
        ON d.cluster = a.cluster AND d.broker = a.broker AND d.topic = a.topic
       AND d.partition = a.partition AND d.usable
),
joined AS (
    SELECT m.*, t.topic IS NOT NULL AS topic_known, t.zk_topic_id, t.topic_mzxid,
           coalesce(b.reachable, false) AS reachable, b.broker_epoch, b.state_change_log,
           s.leader, s.leader_epoch, s.mzxid AS state_mzxid,
           coalesce(array_contains(s.isr, m.broker), false) AS in_isr
    FROM matched m
    LEFT JOIN topics t ON t.cluster = m.cluster AND t.topic = m.topic
    LEFT JOIN brokers b ON b.cluster = m.cluster AND b.broker = m.broker
    LEFT JOIN states s
        ON s.cluster = m.cluster AND s.topic = m.topic AND s.partition = m.partition
),
judged AS (
    -- One replica finding per assigned replica of a known topic on a broker whose disk was
    -- inspected, in this order: no directory for it, no partition.metadata, a file Kafka would
    -- not parse, ZooKeeper has no id or the ids agree, the ids differ (in the ISR or not).
    SELECT f.*,
           CASE WHEN f.assigned AND f.topic_known AND f.reachable AND (NOT f.found OR f.copy = 1)
           THEN CASE
               WHEN NOT f.found THEN '{K.REPLICA_DIR_MISSING}'
               WHEN f.metadata_state = 'missing' THEN '{K.METADATA_MISSING}'
               WHEN f.metadata_state IN ('corrupt', 'unreadable') THEN '{K.METADATA_CORRUPT}'
               WHEN f.zk_topic_id IS NULL OR f.file_topic_id = f.zk_topic_id THEN '{K.OK}'
               WHEN f.in_isr THEN '{K.TOPIC_ID_MISMATCH}'
               ELSE '{K.TOPIC_ID_MISMATCH_OUT_OF_ISR}'
           END END AS replica_kind
    FROM joined f
)
SELECT * FROM judged
"""  # noqa: S608

CLASSIFY_SQL = f"""
WITH absent_log_dirs AS (
    SELECT cluster, broker,
           concat('log dir ',
                  array_join(array_sort(collect_list(concat(log_dir, ' is ', state))), ', '))
               AS note
    FROM log_dirs WHERE state <> 'present' GROUP BY cluster, broker
),
row_findings AS (
    -- Each row is a replica's finding, an orphan directory (found where ZooKeeper assigns
    -- no replica, or not a partition directory at all), or neither (a second copy, a directory
    -- being deleted or moved, a replica on a broker that was not inspected).
    SELECT j.cluster,
           coalesce(j.replica_kind,
                    CASE WHEN j.found AND NOT j.assigned
                              AND j.dir_kind IN ('live', 'stray', 'other')
                         THEN '{K.ORPHAN_DIR}' END) AS kind,
           j.broker, j.topic, j.partition, j.file_topic_id, j.zk_topic_id,
           CASE WHEN j.replica_kind IS NOT NULL THEN j.in_isr END AS in_isr, j.log_dir, j.dir,
           CASE
               WHEN j.replica_kind IS NOT NULL THEN
                   CASE WHEN j.metadata_state IN ('corrupt', 'unreadable')
                            THEN j.metadata_problem
                        WHEN NOT j.found THEN m.note END
               WHEN j.name_problem IS NOT NULL
                   THEN concat('not a partition directory: ', j.name_problem)
               WHEN j.dir_kind = 'stray' THEN 'marked stray by the broker'
               WHEN NOT j.topic_known THEN 'topic does not exist in ZooKeeper'
               ELSE 'partition not assigned to this broker'
           END AS detail
    FROM facts j
    LEFT JOIN absent_log_dirs m ON m.cluster = j.cluster AND m.broker = j.broker
    WHERE j.replica_kind IS NOT NULL
       OR (j.found AND NOT j.assigned AND j.dir_kind IN ('live', 'stray', 'other'))
),
agreement AS (
    -- For a topic that lost its id: the id its replicas agree on, if they all do. A replica
    -- without partition.metadata takes ZooKeeper's id at its next LeaderAndIsr, so it does
    -- not stand in the way; an unreadable file, a missing directory or a broker that could
    -- not be inspected does.
    SELECT cluster, topic, count(*) AS replicas,
           sum(CASE WHEN reachable THEN 0 ELSE 1 END) AS uninspected,
           sum(CASE WHEN replica_kind = '{K.METADATA_MISSING}' THEN 1 ELSE 0 END) AS no_file,
           sum(CASE WHEN reachable
                         AND (replica_kind IS NULL
                              OR replica_kind NOT IN ('{K.OK}', '{K.METADATA_MISSING}'))
                    THEN 1 ELSE 0 END) AS unusable,
           count(DISTINCT CASE WHEN replica_kind IS NOT NULL THEN file_topic_id END) AS ids,
           min(CASE WHEN replica_kind IS NOT NULL THEN file_topic_id END) AS agreed
    FROM facts
    WHERE assigned AND topic_known AND zk_topic_id IS NULL AND (NOT found OR copy = 1)
    GROUP BY cluster, topic
),
topic_findings AS (
    SELECT t.cluster, '{K.ZK_TOPIC_ID_MISSING}' AS kind, CAST(NULL AS INT) AS broker, t.topic,
           CAST(NULL AS INT) AS partition,
           CASE WHEN g.uninspected = 0 AND g.unusable = 0 AND g.ids = 1 THEN g.agreed END
               AS file_topic_id,
           CAST(NULL AS STRING) AS zk_topic_id, CAST(NULL AS BOOLEAN) AS in_isr,
           CAST(NULL AS STRING) AS log_dir, CAST(NULL AS STRING) AS dir,
           concat('topic znode version ', coalesce(CAST(t.data_version AS STRING), '?'),
                  ' has no topic_id; ',
                  CASE
                      WHEN g.topic IS NULL THEN 'it has no replicas'
                      WHEN g.uninspected > 0 THEN concat('no automatic restore: ',
                          CAST(g.uninspected AS STRING),
                          ' replica(s) are on brokers that could not be inspected')
                      WHEN g.unusable > 0 THEN concat('no automatic restore: ',
                          CAST(g.unusable AS STRING), ' of ', CAST(g.replicas AS STRING),
                          ' replica(s) have an unreadable partition.metadata or no directory')
                      WHEN g.ids > 1 THEN concat('no automatic restore: the replicas disagree (',
                          CAST(g.ids AS STRING), ' different ids)')
                      WHEN g.ids = 0 THEN concat('no replica has a partition.metadata: the',
                          ' next controller assigns an id and every replica takes it')
                      WHEN g.no_file > 0 THEN concat(
                          CAST(g.replicas - g.no_file AS STRING), ' replica(s) agree on ',
                          g.agreed, ' and ', CAST(g.no_file AS STRING),
                          ' have no partition.metadata yet; it can be restored')
                      ELSE concat('all ', CAST(g.replicas AS STRING),
                          ' replicas agree on ', g.agreed, ', which can be restored')
                  END) AS detail
    FROM topics t
    LEFT JOIN agreement g ON g.cluster = t.cluster AND g.topic = t.topic
    WHERE t.zk_topic_id IS NULL
),
offline AS (
    SELECT s.cluster, '{K.PARTITION_OFFLINE}' AS kind, CAST(NULL AS INT) AS broker, s.topic,
           s.partition, CAST(NULL AS STRING) AS file_topic_id, t.zk_topic_id,
           CAST(NULL AS BOOLEAN) AS in_isr, CAST(NULL AS STRING) AS log_dir,
           CAST(NULL AS STRING) AS dir,
           concat('leader -1, isr [', array_join(s.isr, ','), ']') AS detail
    FROM states s JOIN topics t ON t.cluster = s.cluster AND t.topic = s.topic
    WHERE s.leader < 0
),
-- {K.LEADER_FENCED_BY_STALE_ID}: ZooKeeper names a leader that is fenced by a stale topic id.
-- Facts (Kafka's source at 2.8.2, paths under core/src/main/scala/kafka/): a broker whose
-- in-memory id differs from a LeaderAndIsr's logs the mismatch
-- (cluster/Partition.scala:438-458) and skips that partition's state change
-- (server/ReplicaManager.scala:1373-1374), so it keeps its old leader epoch; a broker that
-- does become leader at an epoch writes it to its leader-epoch-checkpoint at once
-- (cluster/Partition.scala:592 makeLeader -> log/Log.scala:1366-1370 ->
-- server/epoch/LeaderEpochFileCache.scala:57-62, a new entry for any new epoch, then flush;
-- 3.4.1: cluster/Partition.scala:631 for every new leader epoch); every controller change
-- of leader or ISR bumps leader_epoch (api/LeaderAndIsr.scala:41). So ZooKeeper's
-- leader_epoch above the leader's latest checkpoint epoch, with the leader's
-- partition.metadata holding another id than ZooKeeper, means the leader rejected the
-- current epoch: its AlterIsr is fenced, its high watermark frozen, acks=all produce times
-- out, although ZooKeeper shows a leader and an ISR. A leader whose checkpoint has no entry
-- (absent or empty file) is not judged: the rule needs that fact. The zxids and the logged
-- rejections are evidence, not conditions.
rejected AS (
    SELECT cluster, broker, topic, partition, request_topic_id,
           count(*) AS lines, max(logged_at) AS last_logged_at,
           min(memory_topic_id) AS memory_topic_id
    FROM rejections
    GROUP BY cluster, broker, topic, partition, request_topic_id
),
stale_leaders AS (
    SELECT f.cluster, '{K.LEADER_FENCED_BY_STALE_ID}' AS kind, f.broker, f.topic,
           f.partition, f.file_topic_id, f.zk_topic_id, f.in_isr, f.log_dir, f.dir,
           concat('leader ', CAST(f.broker AS STRING), ' holds ', f.file_topic_id,
                  ', not ZooKeeper\\'s ', f.zk_topic_id, '; ZooKeeper\\'s leader_epoch ',
                  CAST(f.leader_epoch AS STRING), ' is above the leader\\'s latest epoch ',
                  CAST(f.epoch_latest AS STRING),
                  ': the leader rejected it and is fenced (acks=all produce times out)',
                  CASE WHEN j.lines IS NOT NULL
                       THEN concat('; ', CAST(j.lines AS STRING),
                                   ' rejection line(s) in its state-change log')
                       ELSE '' END) AS detail,
           to_json(named_struct(
               'leader_file_topic_id', f.file_topic_id,
               'zk_topic_id', f.zk_topic_id,
               'zk_leader_epoch', f.leader_epoch,
               'leader_epoch_latest', f.epoch_latest,
               'leader_broker_epoch', f.broker_epoch,
               'topic_mzxid', f.topic_mzxid,
               'state_mzxid', f.state_mzxid,
               'restarted_since_topic_write', f.broker_epoch > f.topic_mzxid,
               'state_changed_since_topic_write', f.state_mzxid > f.topic_mzxid,
               'state_change_log', f.state_change_log,
               'rejection_lines', coalesce(j.lines, 0),
               'rejection_memory_topic_id', j.memory_topic_id,
               'rejection_last_logged_at', j.last_logged_at
           ), map('ignoreNullFields', 'false')) AS evidence
    FROM facts f
    LEFT JOIN rejected j
        ON j.cluster = f.cluster AND j.broker = f.broker AND j.topic = f.topic
       AND j.partition = f.partition AND j.request_topic_id = f.zk_topic_id
    WHERE f.usable AND f.copy = 1 AND f.reachable AND f.leader >= 0 AND f.broker = f.leader
      AND f.zk_topic_id IS NOT NULL AND f.metadata_state = 'ok'
      AND f.file_topic_id <> f.zk_topic_id
      AND f.epoch_latest IS NOT NULL AND f.leader_epoch > f.epoch_latest
),
unreachable AS (
    SELECT cluster, '{K.BROKER_UNREACHABLE}' AS kind, broker, CAST(NULL AS STRING) AS topic,
           CAST(NULL AS INT) AS partition, CAST(NULL AS STRING) AS file_topic_id,
           CAST(NULL AS STRING) AS zk_topic_id, CAST(NULL AS BOOLEAN) AS in_isr,
           CAST(NULL AS STRING) AS log_dir, CAST(NULL AS STRING) AS dir, error AS detail
    FROM brokers WHERE NOT reachable
)
SELECT {NO_EVIDENCE} FROM row_findings
UNION ALL SELECT {NO_EVIDENCE} FROM topic_findings
UNION ALL SELECT {NO_EVIDENCE} FROM offline
UNION ALL SELECT {FINDING_COLUMNS} FROM stale_leaders
UNION ALL SELECT {NO_EVIDENCE} FROM unreachable
"""  # noqa: S608

# The finding columns but `cluster`, which the summary groups by.
LISTED_COLUMNS = (
    "kind",
    "broker",
    "topic",
    "partition",
    "file_topic_id",
    "zk_topic_id",
    "in_isr",
    "log_dir",
    "dir",
    "detail",
    "evidence",
)


def summary_sql(*, include_ok: bool) -> str:
    """Over the `findings` view: one row per (cluster, broker, kind) with its count and its
    findings (OK ones only with `include_ok`). One query, so Spark runs one job: every finding
    is counted and the few that are not OK are listed in the same pass."""
    fields = ", ".join(f"'{name}', {name}" for name in LISTED_COLUMNS)
    which = "" if include_ok else f" FILTER (WHERE kind <> '{K.OK}')"
    return (
        "SELECT cluster, broker, kind, count(*) AS n,"  # noqa: S608 - constants only
        f" collect_list(named_struct({fields})){which} AS listed"
        " FROM findings GROUP BY cluster, broker, kind"
    )


BROKERS_SQL = "SELECT cluster, broker, is_controller, registered, reachable FROM brokers"
