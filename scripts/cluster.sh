#!/usr/bin/env bash
# Starts a three-silo cluster on loopback from bin/silo: data dirs <data>/silo1..3; silo1 on
# admin 7380, actor port 7381 and gossip port 7382, silo2 on 7390..7392, silo3 on 7400..7402;
# all with the same --seeds and --bootstrap-expect 3, in development mode (--insecure-dev: the
# default client principal holds every capability). Their logs are printed prefixed with
# their name. Ctrl-C (or SIGTERM) stops all three gracefully. Further arguments go to every
# silo.
#
#   scripts/cluster.sh [data root, default ./data] [silo flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
data="${1:-./data}"
shift || true
bin=./bin/silo
[ -x "$bin" ] || { echo "$bin not found: go build -o bin/silo ./cmd/silo" >&2; exit 1; }

bases=(7380 7390 7400)
seeds="127.0.0.1:7382,127.0.0.1:7392,127.0.0.1:7402"
pids=()

stop() {
  trap - INT TERM
  echo "stopping the three silos..."
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait
  exit 0
}
trap stop INT TERM

for k in 1 2 3; do
  base=${bases[$((k - 1))]}
  mkdir -p "$data/silo$k"
  "$bin" --data "$data/silo$k" --host 127.0.0.1 --port $((base + 1)) --gossip-port $((base + 2)) \
    --admin "127.0.0.1:$base" --seeds "$seeds" --bootstrap-expect 3 --insecure-dev "$@" \
    > >(sed -u "s/^/[silo$k] /") 2>&1 &
  pids+=($!)
done

cat <<INFO
three silos starting (pids ${pids[*]}), data under $data/silo1..3
  admin:  http://127.0.0.1:7380  http://127.0.0.1:7390  http://127.0.0.1:7400
          e.g. curl -s http://127.0.0.1:7380/v1/partitions
  client: client.Dial with Seeds: []string{"127.0.0.1:7382", "127.0.0.1:7392", "127.0.0.1:7402"}
Ctrl-C stops all three.
INFO

wait
