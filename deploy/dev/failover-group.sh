#!/usr/bin/env bash
# A broker group under a failover controller on one machine (docs/design/failover.md):
# three NameServers running the controller quorum (Raft between them) and three brokers in
# controller mode (SYNC_MASTER when elected), each with its own ports and data directory.
#
#   bash deploy/dev/failover-group.sh start   # returns once the controller elected a master
#   bash deploy/dev/failover-group.sh status  # the controller's view
#   bash deploy/dev/failover-group.sh stop
#
# Ports (none of `make serve`'s nor the README's master/slave example's): NameServers/controllers
# 9986-9988 (Raft 9996-9998); broker N (1..3) Kafka 919N, its own NameServer 997N (unused),
# broker 1095N, HA 1096N, admin 817N, gRPC 827N.
# Data, logs and pid files go to $FAILOVER_DIR (default ./failover-data). Runs `rockafka` from
# the PATH, or from .venv (make serve installs it there).
set -euo pipefail
DIR=${FAILOVER_DIR:-./failover-data}
ROCKAFKA=$(command -v rockafka || echo .venv/bin/rockafka)
CONTROLLERS="127.0.0.1:9986;127.0.0.1:9987;127.0.0.1:9988"
PEERS="n0-127.0.0.1:9996;n1-127.0.0.1:9997;n2-127.0.0.1:9998"

start() {
    mkdir -p "$DIR"
    for i in 0 1 2; do
        nohup "$ROCKAFKA" namesrv --host 127.0.0.1 --port $((9986 + i)) --data-dir "$DIR/controller-n$i" \
            --set enableControllerInNamesrv=true --set controllerDLegerPeers="$PEERS" \
            --set controllerDLegerSelfId=n$i >"$DIR/controller-n$i.log" 2>&1 &
        echo $! >"$DIR/controller-n$i.pid"
    done
    for n in 1 2 3; do
        nohup "$ROCKAFKA" serve --host 127.0.0.1 --data-dir "$DIR/broker-$n" \
            --kafka-port $((9190 + n)) --namesrv-port $((9970 + n)) --broker-port $((10950 + n)) \
            --ha-port $((10960 + n)) --admin-port $((8170 + n)) --grpc-port $((8270 + n)) \
            --set enableControllerMode=true --set controllerAddr="$CONTROLLERS" \
            --set namesrvAddr="$CONTROLLERS" --set brokerName=broker-a --set brokerId=$n \
            --set brokerRole=SYNC_MASTER >"$DIR/broker-$n.log" 2>&1 &
        echo $! >"$DIR/broker-$n.pid"
    done
    for _ in $(seq 1 120); do
        if "$ROCKAFKA" admin --namesrv "$CONTROLLERS" --json controller 2>/dev/null \
                | grep -q '"masterBrokerId": [1-3]'; then
            echo "failover group up: Kafka 127.0.0.1:9191,127.0.0.1:9192,127.0.0.1:9193; NameServers $CONTROLLERS"
            return 0
        fi
        sleep 0.5
    done
    echo "no master elected within 60 s; logs in $DIR" >&2
    stop
    return 1
}

stop() {
    for f in "$DIR"/*.pid; do
        [ -e "$f" ] || continue
        kill "$(cat "$f")" 2>/dev/null || true
        rm -f "$f"
    done
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) "$ROCKAFKA" admin --namesrv "$CONTROLLERS" controller ;;
    *) echo "usage: $0 start|status|stop" >&2; exit 2 ;;
esac
