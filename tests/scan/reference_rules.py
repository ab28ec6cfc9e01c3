"""The classification rules as they were first written, one CTE per rule, each reading the
snapshot tables on its own: the oracle that remediate/scan/rules.py's single-pass query is held
to (tests/scan/test_rules_oracle.py). Never used by the tool.
"""

from __future__ import annotations

from remediate.scan.kinds import FindingKind as K

BASE_COLUMNS = (
    "cluster, kind, broker, topic, partition, file_topic_id, zk_topic_id, in_isr,"
    " log_dir, dir, detail"
)
FINDING_COLUMNS = f"{BASE_COLUMNS}, evidence"
NO_EVIDENCE = f"{BASE_COLUMNS}, CAST(NULL AS STRING) AS evidence"

STALE_LEADER_RULE = f"""
-- {K.LEADER_FENCED_BY_STALE_ID}: ZooKeeper names a leader that is fenced by a stale topic id.
-- Facts (Kafka 2.8.2, paths under core/src/main/scala/kafka/): a broker whose in-memory id differs
-- from a LeaderAndIsr's logs the mismatch (cluster/Partition.scala:438-458) and skips that
-- partition's state change (server/ReplicaManager.scala:1373-1374), so it keeps its old leader
-- epoch; a broker that does become leader at an epoch writes it to its leader-epoch-checkpoint at
-- once (cluster/Partition.scala:592 makeLeader -> log/Log.scala:1366-1370 ->
-- server/epoch/LeaderEpochFileCache.scala:57-62, a new entry for any new epoch, then flush; 3.4.1:
-- cluster/Partition.scala:631 for every new leader epoch); every controller change of leader or ISR
-- bumps leader_epoch (api/LeaderAndIsr.scala:41). So ZooKeeper's leader_epoch above the leader's
-- latest checkpoint epoch, with the leader's partition.metadata holding another id than ZooKeeper,
-- means the leader rejected the current epoch: its AlterIsr is fenced, its high watermark frozen,
-- acks=all produce times out, although ZooKeeper shows a leader and an ISR. A leader whose
-- checkpoint has no entry (absent or empty file) is not judged: the rule needs that fact. The zxids
-- and the logged rejections are evidence, not conditions.
rejected AS (
    SELECT cluster, broker, topic, partition, request_topic_id,
           count(*) AS lines, max(logged_at) AS last_logged_at,
           min(memory_topic_id) AS memory_topic_id
    FROM rejections
    GROUP BY cluster, broker, topic, partition, request_topic_id
),
stale_leaders AS (
    SELECT s.cluster, '{K.LEADER_FENCED_BY_STALE_ID}' AS kind, s.leader AS broker, s.topic,
           s.partition, d.file_topic_id, t.zk_topic_id,
           coalesce(array_contains(s.isr, s.leader), false) AS in_isr, d.log_dir, d.dir,
           concat('leader ', CAST(s.leader AS STRING), ' holds ', d.file_topic_id,
                  ', not ZooKeeper\\'s ', t.zk_topic_id, '; ZooKeeper\\'s leader_epoch ',
                  CAST(s.leader_epoch AS STRING), ' is above the leader\\'s latest epoch ',
                  CAST(d.epoch_latest AS STRING),
                  ': the leader rejected it and is fenced (acks=all produce times out)',
                  CASE WHEN j.lines IS NOT NULL
                       THEN concat('; ', CAST(j.lines AS STRING),
                                   ' rejection line(s) in its state-change log')
                       ELSE '' END) AS detail,
           to_json(named_struct(
               'leader_file_topic_id', d.file_topic_id,
               'zk_topic_id', t.zk_topic_id,
               'zk_leader_epoch', s.leader_epoch,
               'leader_epoch_latest', d.epoch_latest,
               'leader_broker_epoch', b.broker_epoch,
               'topic_mzxid', t.topic_mzxid,
               'state_mzxid', s.mzxid,
               'restarted_since_topic_write', b.broker_epoch > t.topic_mzxid,
               'state_changed_since_topic_write', s.mzxid > t.topic_mzxid,
               'state_change_log', b.state_change_log,
               'rejection_lines', coalesce(j.lines, 0),
               'rejection_memory_topic_id', j.memory_topic_id,
               'rejection_last_logged_at', j.last_logged_at
           ), map('ignoreNullFields', 'false')) AS evidence
    FROM states s
    JOIN topics t ON t.cluster = s.cluster AND t.topic = s.topic AND t.zk_topic_id IS NOT NULL
    JOIN brokers b ON b.cluster = s.cluster AND b.broker = s.leader AND b.reachable
    JOIN dirs d
        ON d.cluster = s.cluster AND d.broker = s.leader AND d.topic = s.topic
       AND d.partition = s.partition AND d.copy = 1
    LEFT JOIN rejected j
        ON j.cluster = s.cluster AND j.broker = s.leader AND j.topic = s.topic
       AND j.partition = s.partition AND j.request_topic_id = t.zk_topic_id
    WHERE s.leader >= 0 AND d.metadata_state = 'ok' AND d.file_topic_id <> t.zk_topic_id
      AND d.epoch_latest IS NOT NULL AND s.leader_epoch > d.epoch_latest
),"""

# The SQL is assembled from constants only (the kinds from FindingKind); no input reaches it.
CLASSIFY_SQL = f"""
WITH dirs AS (
    SELECT r.*, row_number() OVER (
               PARTITION BY cluster, broker, topic, partition ORDER BY log_dir) AS copy
    FROM replicas r
    WHERE dir_kind = 'live' AND topic IS NOT NULL AND name_problem IS NULL
),
assigned AS (
    SELECT a.cluster, a.topic, a.partition, a.broker, t.zk_topic_id,
           coalesce(array_contains(s.isr, a.broker), false) AS in_isr
    FROM assignments a
    JOIN topics t ON t.cluster = a.cluster AND t.topic = a.topic
    LEFT JOIN states s ON s.cluster = a.cluster AND s.topic = a.topic AND s.partition = a.partition
    JOIN brokers b ON b.cluster = a.cluster AND b.broker = a.broker AND b.reachable
),
absent_log_dirs AS (
    SELECT cluster, broker,
           concat('log dir ',
                  array_join(array_sort(collect_list(concat(log_dir, ' is ', state))), ', '))
               AS note
    FROM log_dirs WHERE state <> 'present' GROUP BY cluster, broker
),
replica_findings AS (
    SELECT x.cluster,
           CASE
               WHEN d.topic IS NULL THEN '{K.REPLICA_DIR_MISSING}'
               WHEN d.metadata_state = 'missing' THEN '{K.METADATA_MISSING}'
               WHEN d.metadata_state IN ('corrupt', 'unreadable') THEN '{K.METADATA_CORRUPT}'
               WHEN x.zk_topic_id IS NULL OR d.file_topic_id = x.zk_topic_id THEN '{K.OK}'
               WHEN x.in_isr THEN '{K.TOPIC_ID_MISMATCH}'
               ELSE '{K.TOPIC_ID_MISMATCH_OUT_OF_ISR}'
           END AS kind,
           x.broker, x.topic, x.partition, d.file_topic_id, x.zk_topic_id, x.in_isr,
           d.log_dir, d.dir,
           CASE
               WHEN d.metadata_state IN ('corrupt', 'unreadable') THEN d.metadata_problem
               WHEN d.topic IS NULL THEN m.note
           END AS detail
    FROM assigned x
    LEFT JOIN dirs d
        ON d.cluster = x.cluster AND d.broker = x.broker AND d.topic = x.topic
       AND d.partition = x.partition AND d.copy = 1
    LEFT JOIN absent_log_dirs m ON m.cluster = x.cluster AND m.broker = x.broker
),
orphans AS (
    SELECT r.cluster, '{K.ORPHAN_DIR}' AS kind, r.broker, r.topic, r.partition, r.file_topic_id,
           t.zk_topic_id, CAST(NULL AS BOOLEAN) AS in_isr, r.log_dir, r.dir,
           CASE
               WHEN r.name_problem IS NOT NULL
                   THEN concat('not a partition directory: ', r.name_problem)
               WHEN r.dir_kind = 'stray' THEN 'marked stray by the broker'
               WHEN t.topic IS NULL THEN 'topic does not exist in ZooKeeper'
               ELSE 'partition not assigned to this broker'
           END AS detail
    FROM replicas r
    LEFT JOIN topics t ON t.cluster = r.cluster AND t.topic = r.topic
    LEFT ANTI JOIN assignments a
        ON a.cluster = r.cluster AND a.broker = r.broker AND a.topic = r.topic
       AND a.partition = r.partition AND r.dir_kind = 'live' AND r.name_problem IS NULL
    WHERE r.dir_kind IN ('live', 'stray', 'other')
),
agreement AS (
    -- For a topic that lost its id: the id its replicas agree on, if they all do. A replica
    -- without partition.metadata takes ZooKeeper's id at its next LeaderAndIsr, so it does
    -- not stand in the way; an unreadable file, a missing directory or a broker that could
    -- not be inspected does.
    SELECT a.cluster, a.topic, count(*) AS replicas,
           sum(CASE WHEN coalesce(b.reachable, false) THEN 0 ELSE 1 END) AS uninspected,
           sum(CASE WHEN f.kind = '{K.METADATA_MISSING}' THEN 1 ELSE 0 END) AS no_file,
           sum(CASE WHEN coalesce(b.reachable, false)
                         AND (f.kind IS NULL OR f.kind NOT IN ('{K.OK}', '{K.METADATA_MISSING}'))
                    THEN 1 ELSE 0 END) AS unusable,
           count(DISTINCT f.file_topic_id) AS ids,
           min(f.file_topic_id) AS agreed
    FROM assignments a
    JOIN topics t ON t.cluster = a.cluster AND t.topic = a.topic AND t.zk_topic_id IS NULL
    LEFT JOIN brokers b ON b.cluster = a.cluster AND b.broker = a.broker
    LEFT JOIN replica_findings f
        ON f.cluster = a.cluster AND f.topic = a.topic AND f.partition = a.partition
       AND f.broker = a.broker
    GROUP BY a.cluster, a.topic
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
{STALE_LEADER_RULE}
unreachable AS (
    SELECT cluster, '{K.BROKER_UNREACHABLE}' AS kind, broker, CAST(NULL AS STRING) AS topic,
           CAST(NULL AS INT) AS partition, CAST(NULL AS STRING) AS file_topic_id,
           CAST(NULL AS STRING) AS zk_topic_id, CAST(NULL AS BOOLEAN) AS in_isr,
           CAST(NULL AS STRING) AS log_dir, CAST(NULL AS STRING) AS dir, error AS detail
    FROM brokers WHERE NOT reachable
)
SELECT {NO_EVIDENCE} FROM replica_findings
UNION ALL SELECT {NO_EVIDENCE} FROM orphans
UNION ALL SELECT {NO_EVIDENCE} FROM topic_findings
UNION ALL SELECT {NO_EVIDENCE} FROM offline
UNION ALL SELECT {FINDING_COLUMNS} FROM stale_leaders
UNION ALL SELECT {NO_EVIDENCE} FROM unreachable
"""

COUNTS_SQL = (
    "SELECT cluster, broker, kind, count(*) AS n FROM findings GROUP BY cluster, broker, kind"
)
BROKERS_SQL = "SELECT cluster, broker, is_controller, registered, reachable FROM brokers"
