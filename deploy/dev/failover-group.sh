#!/usr/bin/env bash
# A broker group under a failover controller on one machine (docs/design/failover.md), through
# `rockafka cluster` (rockafka/cluster_launcher.py): three NameServers running the controller
# quorum (Raft between them) and one group of three brokers in controller mode (SYNC_MASTER
# when elected), each its own process with its own data directory and pid file.
#
#   bash deploy/dev/failover-group.sh start   # returns once the controller elected a master
#   bash deploy/dev/failover-group.sh status  # every process and the controller's view
#   bash deploy/dev/failover-group.sh stop
#
# `start` on a running group is refused (exit 2) and leaves it running; `stop` stops every
# process `start` started, checked by pid. Ports: the launcher's plan from --base-port 9900
# (controllers 9900-9902, Raft 9950-9952; broker N of 1..3 Kafka 10000 + 10(N-1), `status` lists all).
# Data, logs and pid files go to $FAILOVER_DIR (default ./failover-data). Runs
# `rockafka` from the PATH, or from .venv (make serve installs it there).
set -euo pipefail
DIR=${FAILOVER_DIR:-./failover-data}
ROCKAFKA=$(command -v rockafka || echo .venv/bin/rockafka)

case "${1:-}" in
    start) exec "$ROCKAFKA" cluster up --dir "$DIR" --controllers 3 --groups 1 --replicas 3 --base-port 9900 ;;
    stop) exec "$ROCKAFKA" cluster down --dir "$DIR" ;;
    status) exec "$ROCKAFKA" cluster status --dir "$DIR" ;;
    *) echo "usage: $0 start|status|stop" >&2; exit 2 ;;
esac
