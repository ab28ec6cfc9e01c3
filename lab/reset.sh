#!/usr/bin/env bash
# Stop the Kafka lab and remove what it left: containers, the brokers' data, remediate's
# backups and journal for the lab. The next lab/reproduce.sh starts from nothing.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")

docker compose -f "$root/docker-compose.yml" --profile legacy down --remove-orphans
# The brokers wrote their data dirs as root.
rm -rf -- "$here/data" "$here/backups" "$here/journal"
echo "lab reset: containers removed, data, backups and journal deleted"
