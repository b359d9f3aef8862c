#!/usr/bin/env bash
# tests/redis-tls-cluster.sh - a throw-away three-node Redis Cluster speaking only TLS,
# the local stand-in for ElastiCache Serverless (cluster mode, TLS) in the AWS cache tests.
#
#   tests/redis-tls-cluster.sh start DIR   # DIR must exist; everything goes in it
#   tests/redis-tls-cluster.sh stop DIR
#
# `start` makes a private CA and a server certificate valid for 127.0.0.1 and localhost,
# starts three masters on free loopback ports (TLS only, TLS on the cluster bus too,
# no persistence), joins them into a cluster, waits for `cluster_state:ok`, and prints
#
#   CONTINUITY_TEST_REDIS_CLUSTER_URLS=rediss://127.0.0.1:P1,rediss://127.0.0.1:P2,...
#   CONTINUITY_TEST_REDIS_CA=DIR/ca.pem
#
# on stdout (also written to DIR/env); nothing else goes to stdout. Logs are in DIR.
# Set CONTINUITY_REDIS_CLUSTER_PORTS="p1 p2 p3" to choose the client ports (the cluster
# bus then uses p+10000); otherwise free ports are picked for both.
# `stop` shuts the nodes down and removes what `start` wrote, leaving DIR itself.
set -euo pipefail

usage() {
  echo "usage: $0 start|stop DIR" >&2
  exit 2
}

[ "$#" -eq 2 ] || usage
CMD="$1"
DIR="$2"
[ -d "$DIR" ] || { echo "error: $DIR is not a directory" >&2; exit 2; }
DIR="$(cd "$DIR" && pwd)"
NODES=3

# Free TCP ports on loopback: bind to port 0 and let the kernel choose.
free_ports() {
  python3 -c 'import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
for s in socks:
    s.close()' "$1"
}

# Bounded: something other than our TLS node on the port (a plain Redis, say) would
# otherwise leave redis-cli waiting on the handshake forever.
cli() {
  local port="$1"
  shift
  timeout 5 redis-cli --tls --cacert "$DIR/ca.pem" -h 127.0.0.1 -p "$port" "$@"
}

make_certs() {
  local ext="$DIR/server.ext"
  openssl ecparam -name prime256v1 -genkey -noout -out "$DIR/ca.key" 2>/dev/null
  openssl req -x509 -new -key "$DIR/ca.key" -sha256 -days 2 -subj "/CN=continuity-test-ca" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$DIR/ca.pem" 2>/dev/null
  openssl ecparam -name prime256v1 -genkey -noout -out "$DIR/server.key" 2>/dev/null
  openssl req -new -key "$DIR/server.key" -subj "/CN=localhost" -out "$DIR/server.csr" 2>/dev/null
  cat >"$ext" <<'EOF'
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth, clientAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
EOF
  openssl x509 -req -in "$DIR/server.csr" -CA "$DIR/ca.pem" -CAkey "$DIR/ca.key" -CAcreateserial \
    -days 2 -sha256 -extfile "$ext" -out "$DIR/server.pem" 2>/dev/null
  rm -f "$DIR/server.csr" "$ext" "$DIR/ca.srl"
  # redis-server runs as the caller; keep the keys private anyway.
  chmod 600 "$DIR/ca.key" "$DIR/server.key"
}

on_start_exit() {
  local rc=$?
  if [ "$rc" -ne 0 ]; then
    kill_nodes
  fi
}

start() {
  local ports buses
  if [ -n "${CONTINUITY_REDIS_CLUSTER_PORTS:-}" ]; then
    read -r -a ports <<<"$CONTINUITY_REDIS_CLUSTER_PORTS"
    [ "${#ports[@]}" -eq "$NODES" ] || { echo "error: CONTINUITY_REDIS_CLUSTER_PORTS needs $NODES ports" >&2; exit 2; }
    buses=()
    local p
    for p in "${ports[@]}"; do buses+=($((p + 10000))); done
  else
    local all
    read -r -a all < <(free_ports $((NODES * 2)))
    ports=("${all[@]:0:NODES}")
    buses=("${all[@]:NODES}")
  fi

  # A failed start must not leave nodes running; the logs stay in DIR for the caller.
  trap on_start_exit EXIT

  make_certs

  local i
  for i in $(seq 1 "$NODES"); do
    redis-server \
      --bind 127.0.0.1 --port 0 --tls-port "${ports[$((i - 1))]}" \
      --tls-cert-file "$DIR/server.pem" --tls-key-file "$DIR/server.key" \
      --tls-ca-cert-file "$DIR/ca.pem" --tls-auth-clients no \
      --tls-cluster yes --tls-replication yes \
      --cluster-enabled yes --cluster-port "${buses[$((i - 1))]}" \
      --cluster-config-file "$DIR/nodes-$i.conf" \
      --save '' --appendonly no --dir "$DIR" \
      --pidfile "$DIR/redis-$i.pid" --logfile "$DIR/redis-$i.log" \
      --daemonize yes
  done

  # Wait for every node to answer over TLS, failing early when one has died (a port
  # taken between our pick and its bind, say): its pidfile is gone or names no process.
  local port deadline pid launched=$SECONDS
  for i in $(seq 1 "$NODES"); do
    port="${ports[$((i - 1))]}"
    deadline=$((SECONDS + 15))
    until [ "$(cli "$port" ping 2>/dev/null)" = "PONG" ]; do
      pid="$(cat "$DIR/redis-$i.pid" 2>/dev/null || true)"
      if [ "$SECONDS" -ge "$deadline" ] || { [ $((SECONDS - launched)) -ge 1 ] && { [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; }; }; then
        echo "error: redis node $i (port $port) did not start; see $DIR/redis-$i.log" >&2
        exit 1
      fi
      sleep 0.1
    done
  done

  local seeds=()
  for port in "${ports[@]}"; do seeds+=("127.0.0.1:$port"); done
  if ! timeout 60 redis-cli --tls --cacert "$DIR/ca.pem" --cluster create "${seeds[@]}" --cluster-yes \
    >"$DIR/cluster-create.log" 2>&1; then
    cat "$DIR/cluster-create.log" >&2
    exit 1
  fi

  # The slots are assigned at once, but each node agrees the cluster is ok only after
  # gossip; clients that connect earlier get CLUSTERDOWN.
  local n
  for port in "${ports[@]}"; do
    n=0
    until cli "$port" cluster info 2>/dev/null | grep -q '^cluster_state:ok'; do
      n=$((n + 1))
      if [ "$n" -gt 300 ]; then
        echo "error: the cluster did not reach cluster_state:ok; see $DIR/cluster-create.log" >&2
        exit 1
      fi
      sleep 0.1
    done
  done

  local urls=()
  for port in "${ports[@]}"; do urls+=("rediss://127.0.0.1:$port"); done
  local joined
  joined="$(IFS=,; echo "${urls[*]}")"
  {
    echo "CONTINUITY_TEST_REDIS_CLUSTER_URLS=$joined"
    echo "CONTINUITY_TEST_REDIS_CA=$DIR/ca.pem"
  } >"$DIR/env"
  cat "$DIR/env"
}

kill_nodes() {
  local pidfile pid n
  for pidfile in "$DIR"/redis-*.pid; do
    [ -f "$pidfile" ] || continue
    pid="$(cat "$pidfile")"
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      n=0
      while kill -0 "$pid" 2>/dev/null && [ "$n" -lt 50 ]; do
        sleep 0.1
        n=$((n + 1))
      done
      kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
  done
}

stop() {
  kill_nodes
  rm -f "$DIR"/nodes-*.conf "$DIR"/redis-*.log "$DIR"/cluster-create.log "$DIR"/env \
    "$DIR"/ca.pem "$DIR"/ca.key "$DIR"/server.pem "$DIR"/server.key
}

case "$CMD" in
  start) start ;;
  stop) stop ;;
  *) usage ;;
esac
