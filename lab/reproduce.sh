#!/usr/bin/env bash
# The incident on the real Kafka lab (../docker-compose.yml), step by step. Each step says
# what it does and shows ZooKeeper's view afterwards.
#
#   lab/reproduce.sh             # starts the lab if needed, then all eight steps
#   lab/reproduce.sh --until 4   # stop after the legacy add-partitions, before any failover:
#                                # the ZK_TOPIC_ID_MISSING state that remediate restores
#   TOPIC=orders lab/reproduce.sh
#
# Needs Docker with the compose plugin, and root (the brokers write their data dirs as root).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
topic=${TOPIC:-incident}
until_step=8

usage() { echo "usage: $0 [--until STEP]   (STEP 1-8)" >&2; exit 64; }
while [ $# -gt 0 ]; do
  case $1 in
    --until) [ $# -ge 2 ] || usage; until_step=$2; shift 2 ;;
    -h|--help) usage ;;
    *) usage ;;
  esac
done
case $until_step in [1-8]) ;; *) usage ;; esac
case $topic in *[!A-Za-z0-9._-]*|'') echo "TOPIC: letters, digits, '.', '_' and '-' only" >&2; exit 64 ;; esac

compose() { docker compose -f "$root/docker-compose.yml" "$@"; }
kafka() { compose exec -T kafka-1 "$@"; }
# zookeeper-shell prints its connection chatter first and the answer last.
zk() { kafka zookeeper-shell zookeeper:2181 "$@" 2>/dev/null | tail -n 1; }
# One field of the JSON document on stdin, or "(none)" (no such node, no such field).
json() {
  python3 -c '
import json, sys
try:
    print(json.loads(sys.stdin.read()).get(sys.argv[1], "(none)"))
except (ValueError, AttributeError):
    print("(none)")
' "$1"
}

step() {
  echo
  echo "== step $1: $2"
}

wait_for() {
  local what=$1
  shift
  for _ in $(seq 1 90); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 2
  done
  echo "timed out after 180 s waiting for $what" >&2
  exit 1
}

registered() { [ "$(zk ls /brokers/ids)" = "[1, 2, 3]" ]; }
has_controller() { zk get /controller | grep -q brokerid; }
topic_id() { zk get "/brokers/topics/$topic" | json topic_id; }
has_topic_id() { [ "$(topic_id)" != "(none)" ]; }
controller() { zk get /controller | json brokerid; }
isr() { zk get "/brokers/topics/$topic/partitions/$1/state" | json isr; }
metadata_files() {  # $1 expected: the old partitions' files on the three brokers' data dirs
  [ "$(find "$here/data" -path "*/$topic-[0-2]/partition.metadata" | wc -l)" -eq "$1" ]
}

produce() {  # $1 records, keyed 1..$1 so that they land on every partition
  seq 1 "$1" | sed 's/.*/&:value-&/' | kafka kafka-console-producer \
    --bootstrap-server kafka-1:9092 --topic "$topic" --producer-property acks=all \
    --property parse.key=true --property key.separator=: >/dev/null
  echo "produced $1 records (acks=all)"
}

consume() {  # $1 records expected
  local got
  got=$(kafka kafka-console-consumer --bootstrap-server kafka-1:9092 --topic "$topic" \
    --from-beginning --max-messages "$1" --timeout-ms 30000 2>/dev/null | wc -l)
  echo "consumed $got of $1 records"
  [ "$got" -eq "$1" ]
}

step 0 "start ZooKeeper and three Kafka 2.8 brokers (inter.broker.protocol.version 2.8)"
mkdir -p "$here/data/kafka-1" "$here/data/kafka-2" "$here/data/kafka-3"
compose up -d zookeeper kafka-1 kafka-2 kafka-3
wait_for "three registered brokers" registered
wait_for "a controller" has_controller
echo "brokers $(zk ls /brokers/ids), controller $(controller)"

step 1 "create topic '$topic' through ZooKeeper with Kafka 1.0's kafka-topics (no topic_id)"
compose --profile legacy run --rm -T kafka-legacy kafka-topics --zookeeper zookeeper:2181 \
  --create --topic "$topic" --partitions 3 --replication-factor 3 --config min.insync.replicas=2
wait_for "the controller to give '$topic' a topic_id" has_topic_id
echo "topic_id in ZooKeeper (assigned by the 2.8 controller): $(topic_id)"
# A 2.8 broker writes partition.metadata only when a LeaderAndIsr reaches a log that already
# exists, so a new topic's replicas have none yet; long-lived topics always have. An ordinary
# controller move, while the znode still holds the id, gives every replica its file.
zk delete /controller >/dev/null
wait_for "a controller again" has_controller
wait_for "partition.metadata in all nine replicas" metadata_files 9
echo "every replica's partition.metadata holds it (after an ordinary controller move)"
[ "$until_step" -ge 2 ] || exit 0

step 2 "produce"
produce 300
[ "$until_step" -ge 3 ] || exit 0

step 3 "consume"
consume 300
[ "$until_step" -ge 4 ] || exit 0

step 4 "add partitions the legacy way: Kafka 1.0's kafka-topics --zookeeper --alter --partitions 6"
compose --profile legacy run --rm -T kafka-legacy kafka-topics --zookeeper zookeeper:2181 \
  --alter --topic "$topic" --partitions 6
sleep 5
echo "topic_id in ZooKeeper now: $(topic_id)   (the legacy client rewrote the znode without it)"
if [ "$until_step" -le 4 ]; then
  echo
  echo "Every replica still holds the old id; ZooKeeper has none. Before any controller"
  echo "failover, remediate writes the replicas' id back (no restart):"
  echo "  remediate check -c lab/cluster.yaml        # ZK_TOPIC_ID_MISSING"
  echo "  remediate fix -c lab/cluster.yaml --yes"
  exit 0
fi

step 5 "produce and consume on all six partitions"
produce 600
consume 900

step 6 "controller failover (delete /controller); the new controller mints a new topic_id"
old=$(controller)
zk delete /controller >/dev/null
wait_for "a new controller" has_controller
wait_for "the new controller to give '$topic' a topic_id" has_topic_id
echo "controller $old -> $(controller); topic_id in ZooKeeper now: $(topic_id)"
[ "$until_step" -ge 7 ] || exit 0

step 7 "produce and consume still work (no broker has restarted yet)"
produce 300
consume 1200
[ "$until_step" -ge 8 ] || exit 0

step 8 "restart one broker that is not the controller"
current=$(controller)
victim=1
for candidate in 1 2 3; do
  if [ "$candidate" != "$current" ]; then victim=$candidate; break; fi
done
compose restart "kafka-$victim"
wait_for "broker $victim to register again" registered
sleep 15
echo "kafka-$victim's log:"
compose logs --no-color "kafka-$victim" | grep 'does not match the topic Id' | head -n 3 || true
for p in 0 1 2; do echo "$topic-$p isr: $(isr "$p")"; done
echo
echo "Broker $victim refuses the old partitions and stays out of their ISR. Next:"
echo "  remediate check -c lab/cluster.yaml"
echo "  remediate fix -c lab/cluster.yaml      # the dry run: what it would do, and why"
