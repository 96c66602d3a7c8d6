#!/bin/bash
# A throw-away 3-node MariaDB Galera cluster on loopback for tests: own
# data dirs under /tmp, own ports, never /etc/mysql (each node reads only
# its own generated config file) and never a system MariaDB.
#
#   scripts/galera-throwaway.sh start   # fresh cluster: bootstrap node 0, join 1 and 2, print the URLs
#   scripts/galera-throwaway.sh dsn     # print the URLs of the running cluster (one per node)
#   scripts/galera-throwaway.sh status  # each node's wsrep state and the cluster size
#   scripts/galera-throwaway.sh stop    # stop the nodes (data dirs kept)
#   scripts/galera-throwaway.sh purge   # stop them and delete the base dir
#   scripts/galera-throwaway.sh reject N ALL|NONE
#                                       # node N refuses (or serves again) every query, as a
#                                       # node out of the primary component does (error 1047)
#
# start always makes a new cluster (the data of an earlier one is
# deleted): node 0 is bootstrapped with --wsrep-new-cluster, then nodes 1
# and 2 join one after the other, each with a state transfer by rsync
# (wsrep_sst_method=rsync; works offline), and each must report Synced
# before the next starts. Every wait is bounded.
#
# Node i listens for clients on 127.0.0.1:(PORT+i), for group
# communication (gcomm) on GCOMM+10*i, for incremental state transfer on
# GCOMM+10*i+1 and for rsync state transfer on GCOMM+10*i+2.
#
# Printed URLs (oslo style, one line per node):
#   mysql+pymysql://leasehold:<password>@127.0.0.1:<PORT+i>/
# The account leasehold has every privilege on databases named lh_* only.
#
# Environment: LEASEHOLD_GALERA_PORT (3420), LEASEHOLD_GALERA_GCOMM_PORT
# (4567), LEASEHOLD_GALERA_DIR (/tmp/leasehold-galera-<PORT>). As root
# with apt-get, mariadb-server, galera-4 and rsync are installed if
# missing (scripts/deps.sh).
set -euo pipefail

PORT="${LEASEHOLD_GALERA_PORT:-3420}"
GCOMM="${LEASEHOLD_GALERA_GCOMM_PORT:-4567}"
BASE="${LEASEHOLD_GALERA_DIR:-/tmp/leasehold-galera-$PORT}"
PWFILE="$BASE/password"
USER_NAME=leasehold
PROVIDER=/usr/lib/galera/libgalera_smm.so
NODES=3
HERE="$(cd "$(dirname "$0")" && pwd)"

say() { echo "galera-throwaway: $*" >&2; }

for p in "$PORT" "$((PORT + 1))" "$((PORT + 2))"; do
  if [ "$p" = 3306 ] || [ "$p" = 3307 ]; then
    say "refusing port $p (the system MariaDB's or the shared test server's)"
    exit 2
  fi
done

find_bin() {
  local n
  for n in "$@"; do
    if command -v "$n" >/dev/null 2>&1; then command -v "$n"; return 0; fi
    if [ -x "/usr/sbin/$n" ]; then echo "/usr/sbin/$n"; return 0; fi
    if [ -x "/usr/bin/$n" ]; then echo "/usr/bin/$n"; return 0; fi
  done
  return 1
}

installed() {
  find_bin mariadbd mysqld >/dev/null && find_bin mariadb-install-db mysql_install_db >/dev/null &&
    find_bin mariadb mysql >/dev/null && [ -f "$PROVIDER" ] && command -v rsync >/dev/null 2>&1
}

ensure_installed() {
  installed && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "mariadb-server, galera-4 or rsync missing; installing them"
    LEASEHOLD_DEPS="mariadb-server mariadb-client galera-4 rsync" "$HERE/deps.sh" >&2
  fi
  if ! installed; then
    say "mariadb-server, galera-4 ($PROVIDER) and rsync are needed (and cannot install them: need root and apt-get)"
    exit 3
  fi
}

node_dir() { echo "$BASE/n$1"; }
node_port() { echo $((PORT + $1)); }
gcomm_port() { echo $((GCOMM + 10 * $1)); }
sock() { echo "$(node_dir "$1")/mysqld.sock"; }
pidfile() { echo "$(node_dir "$1")/mysqld.pid"; }

running_pid() {
  local pid f
  for f in "$(pidfile "$1")" "$(node_dir "$1")/started.pid"; do
    [ -f "$f" ] || continue
    pid="$(cat "$f" 2>/dev/null || true)"
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      echo "$pid"
      return 0
    fi
  done
  return 1
}

# root_sql N SQL: run SQL on node N as root over its socket (unix_socket
# authentication: the script runs as root or as the owner of the data).
root_sql() {
  "$(find_bin mariadb mysql)" --no-defaults --protocol=socket --socket="$(sock "$1")" -uroot \
    --connect-timeout=2 -N -B -e "$2" 2>/dev/null
}

wsrep_state() { root_sql "$1" "SHOW STATUS LIKE 'wsrep_local_state_comment'" | awk '{print $2}'; }
cluster_size() { root_sql "$1" "SHOW STATUS LIKE 'wsrep_cluster_size'" | awk '{print $2}'; }

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

url() { echo "mysql+pymysql://$USER_NAME:$(cat "$PWFILE")@127.0.0.1:$(node_port "$1")/"; }

write_config() {
  local i=$1 dir addr=() j
  dir="$(node_dir "$i")"
  for j in $(seq 0 $((NODES - 1))); do addr+=("127.0.0.1:$(gcomm_port "$j")"); done
  local g
  g="$(gcomm_port "$i")"
  cat > "$dir/my.cnf" <<CNF
[mysqld]
datadir=$dir/data
port=$(node_port "$i")
bind-address=127.0.0.1
socket=$(sock "$i")
pid-file=$(pidfile "$i")
log-error=$dir/mysqld.log
skip-name-resolve
character-set-server=utf8mb4
collation-server=utf8mb4_bin
max-connections=600
innodb-buffer-pool-size=64M
innodb-log-file-size=64M
# Galera needs row-based replication and interleaved auto-increment
# locks; the nodes sync through replication, so the test cluster spares
# the loaded machine an fsync per commit.
binlog-format=ROW
default-storage-engine=InnoDB
innodb-autoinc-lock-mode=2
innodb-flush-log-at-trx-commit=2
wsrep-on=ON
wsrep-provider=$PROVIDER
wsrep-cluster-name=leasehold_throwaway_$PORT
wsrep-cluster-address=gcomm://$(IFS=,; echo "${addr[*]}")
wsrep-node-name=n$i
wsrep-node-address=127.0.0.1:$g
wsrep-provider-options="gmcast.listen_addr=tcp://127.0.0.1:$g;ist.recv_addr=127.0.0.1:$((g + 1));gcache.size=64M"
wsrep-sst-method=rsync
wsrep-sst-receive-address=127.0.0.1:$((g + 2))
wsrep-slave-threads=2
# Galera logs like a binary log: without this, only SUPER may create the
# triggers the tests count executions with.
log-bin-trust-function-creators=ON
CNF
}

start_node() {
  local i=$1 extra=("${@:2}") mysqld dir
  mysqld="$(find_bin mariadbd mysqld)"
  dir="$(node_dir "$i")"
  say "starting node $i on 127.0.0.1:$(node_port "$i") (gcomm $(gcomm_port "$i"), log $dir/mysqld.log)"
  setsid nohup "$mysqld" --defaults-file="$dir/my.cnf" "${RUN_AS[@]}" "${extra[@]}" \
    </dev/null >>"$dir/stdout.log" 2>&1 &
  # mariadbd writes its pid file only after a joiner's state transfer.
  echo $! > "$dir/started.pid"
}

# wait_synced N SECONDS: until node N says Synced.
wait_synced() {
  local i=$1 n=$(($2 * 4)) k st=""
  for k in $(seq 1 "$n"); do
    st="$(wsrep_state "$i" || true)"
    if [ "$st" = Synced ]; then
      say "node $i synced after ~$((k / 4)) s"
      return 0
    fi
    if [ "$k" -gt 20 ] && ! running_pid "$i" >/dev/null; then
      say "node $i exited during start; last lines of its log:"
      tail -25 "$(node_dir "$i")/mysqld.log" >&2 || true
      return 1
    fi
    sleep 0.25
  done
  say "node $i not synced after $2 s (state '$st'); last lines of its log:"
  tail -25 "$(node_dir "$i")/mysqld.log" >&2 || true
  return 1
}

all_running() {
  local i
  for i in $(seq 0 $((NODES - 1))); do running_pid "$i" >/dev/null || return 1; done
}

stop() {
  local i pid k
  for i in $(seq $((NODES - 1)) -1 0); do
    if ! pid="$(running_pid "$i")"; then continue; fi
    say "stopping node $i (pid $pid)"
    kill -TERM "$pid"
    for k in $(seq 1 240); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.25
    done
    if kill -0 "$pid" 2>/dev/null; then
      say "node $i did not stop in 60 s; killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
}

start() {
  ensure_installed
  if all_running && [ "$(cluster_size 0 || true)" = "$NODES" ]; then
    say "already running (base dir $BASE)"
    for i in $(seq 0 $((NODES - 1))); do url "$i"; done
    return 0
  fi
  stop
  local i p install_db
  for i in $(seq 0 $((NODES - 1))); do
    for p in "$(node_port "$i")" "$(gcomm_port "$i")" "$(($(gcomm_port "$i") + 1))" "$(($(gcomm_port "$i") + 2))"; do
      if port_busy "$p"; then
        say "127.0.0.1:$p is in use by another program; set LEASEHOLD_GALERA_PORT / LEASEHOLD_GALERA_GCOMM_PORT"
        exit 4
      fi
    done
  done
  rm -rf "$BASE"
  mkdir -p "$BASE"
  chmod 700 "$BASE"
  (umask 077; head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$PWFILE")
  RUN_AS=()
  if [ "$(id -u)" = 0 ]; then
    # mariadbd will not run as root unless told; use the package's user.
    if id mysql >/dev/null 2>&1; then RUN_AS=(--user=mysql); else RUN_AS=(--user=root); fi
  fi
  for i in $(seq 0 $((NODES - 1))); do
    mkdir -p "$(node_dir "$i")/data"
    write_config "$i"
  done
  if [ "${#RUN_AS[@]}" -gt 0 ] && [ "${RUN_AS[0]}" = --user=mysql ]; then
    chown -R mysql: "$BASE"
    chmod 700 "$BASE"
    chown root: "$PWFILE"
  fi
  install_db="$(find_bin mariadb-install-db mysql_install_db)"
  # Only node 0 needs system tables: the joiners receive everything,
  # accounts included, by state transfer.
  say "initialising node 0's data dir"
  if ! "$install_db" --no-defaults --datadir="$(node_dir 0)/data" "${RUN_AS[@]}" --skip-test-db \
       --auth-root-authentication-method=socket >"$BASE/install.log" 2>&1; then
    say "mariadb-install-db failed; see $BASE/install.log"
    tail -20 "$BASE/install.log" >&2
    exit 5
  fi
  start_node 0 --wsrep-new-cluster
  wait_synced 0 60 || exit 6
  local pw
  pw="$(cat "$PWFILE")"
  # Replicated to the joiners by their state transfer.
  root_sql 0 "CREATE USER '$USER_NAME'@'127.0.0.1' IDENTIFIED BY '$pw';
GRANT ALL PRIVILEGES ON \`lh\\_%\`.* TO '$USER_NAME'@'127.0.0.1';" || { say "could not create the account"; exit 7; }
  for i in $(seq 1 $((NODES - 1))); do
    start_node "$i"
    wait_synced "$i" 120 || exit 8
  done
  local size
  size="$(cluster_size 0 || true)"
  if [ "$size" != "$NODES" ]; then
    say "cluster size is '$size', want $NODES"
    exit 9
  fi
  say "cluster of $NODES nodes ready (base dir $BASE)"
  for i in $(seq 0 $((NODES - 1))); do url "$i"; done
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  purge) stop; rm -rf "$BASE"; say "removed $BASE" ;;
  dsn)
    if all_running && [ -f "$PWFILE" ]; then
      for i in $(seq 0 $((NODES - 1))); do url "$i"; done
    else
      say "not running (start it first)"; exit 1
    fi ;;
  status)
    rc=0
    for i in $(seq 0 $((NODES - 1))); do
      if pid="$(running_pid "$i")"; then
        say "node $i: pid $pid, 127.0.0.1:$(node_port "$i"), state $(wsrep_state "$i" || echo '?'), cluster size $(cluster_size "$i" || echo '?')"
      else
        say "node $i: not running"; rc=1
      fi
    done
    exit "$rc" ;;
  reject)
    case "${3:-}" in ALL|NONE) ;; *) echo "usage: $0 reject N ALL|NONE" >&2; exit 2 ;; esac
    running_pid "${2:-x}" >/dev/null || { say "node ${2:-?} is not running"; exit 1; }
    root_sql "$2" "SET GLOBAL wsrep_reject_queries = $3" || { say "could not set wsrep_reject_queries on node $2"; exit 1; }
    say "node $2: wsrep_reject_queries = $3" ;;
  *) echo "usage: $0 start|stop|dsn|status|purge|reject" >&2; exit 2 ;;
esac
