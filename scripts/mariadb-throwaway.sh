#!/bin/bash
# A throw-away MariaDB server for tests and benchmarks, on 127.0.0.1:3307
# with its own data dir under /tmp. It never reads /etc/mysql (it runs
# with --no-defaults) and never touches a system MariaDB on 3306.
#
#   scripts/mariadb-throwaway.sh start   # start (or find running), wait until ready, print the URL
#   scripts/mariadb-throwaway.sh dsn     # print the URL of the running server (exit 1 if not running)
#   scripts/mariadb-throwaway.sh status  # say whether it runs
#   scripts/mariadb-throwaway.sh stop    # stop it (data dir kept)
#   scripts/mariadb-throwaway.sh purge   # stop it and delete the data dir
#
# The URL (oslo style, for LEASEHOLD_TEST_MYSQL_DSN) is
#   mysql+pymysql://leasehold:<password>@127.0.0.1:3307/
# The account leasehold has a random password (kept in the data dir) and
# every privilege on databases named lh_* only (tests make lh_test_*,
# the conformance run lh_conf_*, the benchmark lh_bench_*); grants are
# checked as on a real server.
#
# Environment: LEASEHOLD_MARIADB_PORT (3307), LEASEHOLD_MARIADB_DIR
# (/tmp/leasehold-mariadb-<port>). As root with apt-get, mariadb-server is
# installed if missing.
set -euo pipefail

PORT="${LEASEHOLD_MARIADB_PORT:-3307}"
BASE="${LEASEHOLD_MARIADB_DIR:-/tmp/leasehold-mariadb-$PORT}"
DATA="$BASE/data"
SOCK="$BASE/mysqld.sock"
PIDFILE="$BASE/mysqld.pid"
LOG="$BASE/mysqld.log"
PWFILE="$BASE/password"
INIT="$BASE/init.sql"
USER_NAME=leasehold
HERE="$(cd "$(dirname "$0")" && pwd)"

if [ "$PORT" = 3306 ]; then
  echo "mariadb-throwaway: refusing port 3306 (that is the system MariaDB's)" >&2
  exit 2
fi

say() { echo "mariadb-throwaway: $*" >&2; }

find_bin() {
  local n
  for n in "$@"; do
    if command -v "$n" >/dev/null 2>&1; then command -v "$n"; return 0; fi
    if [ -x "/usr/sbin/$n" ]; then echo "/usr/sbin/$n"; return 0; fi
    if [ -x "/usr/bin/$n" ]; then echo "/usr/bin/$n"; return 0; fi
  done
  return 1
}

ensure_installed() {
  if find_bin mariadbd mysqld >/dev/null && find_bin mariadb-install-db mysql_install_db >/dev/null \
     && find_bin mariadb-admin mysqladmin >/dev/null; then
    return 0
  fi
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "mariadb-server is not installed; installing it"
    LEASEHOLD_DEPS="mariadb-server mariadb-client" "$HERE/deps.sh" >&2
  fi
  if ! find_bin mariadbd mysqld >/dev/null; then
    say "mariadb-server is not installed (and cannot install it: need root and apt-get)"
    exit 3
  fi
}

running_pid() {
  local pid
  [ -f "$PIDFILE" ] || return 1
  pid="$(cat "$PIDFILE" 2>/dev/null || true)"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  echo "$pid"
}

password() { cat "$PWFILE"; }

url() { echo "mysql+pymysql://$USER_NAME:$(password)@127.0.0.1:$PORT/"; }

ping_ok() {
  local admin
  admin="$(find_bin mariadb-admin mysqladmin)"
  MYSQL_PWD="$(password)" "$admin" --no-defaults --protocol=tcp -h127.0.0.1 -P"$PORT" \
    -u"$USER_NAME" --connect-timeout=2 ping >/dev/null 2>&1
}

port_busy() {
  (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null
}

start() {
  ensure_installed
  if running_pid >/dev/null && [ -f "$PWFILE" ] && ping_ok; then
    say "already running on 127.0.0.1:$PORT (data dir $DATA)"
    url
    return 0
  fi
  if ! running_pid >/dev/null && port_busy; then
    say "127.0.0.1:$PORT is in use by another program; set LEASEHOLD_MARIADB_PORT"
    exit 4
  fi
  local mysqld install_db run_as=()
  mysqld="$(find_bin mariadbd mysqld)"
  install_db="$(find_bin mariadb-install-db mysql_install_db)"
  mkdir -p "$BASE"
  chmod 700 "$BASE"
  if [ ! -s "$PWFILE" ]; then
    (umask 077; head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$PWFILE")
  fi
  if [ "$(id -u)" = 0 ]; then
    # mariadbd will not run as root unless told; use the package's user.
    if id mysql >/dev/null 2>&1; then
      run_as=(--user=mysql)
      chown -R mysql: "$BASE"
      chmod 700 "$BASE"
    else
      run_as=(--user=root)
    fi
  fi
  if [ ! -d "$DATA/mysql" ]; then
    say "initialising data dir $DATA"
    rm -rf "$DATA"
    if ! "$install_db" --no-defaults --datadir="$DATA" "${run_as[@]}" --skip-test-db \
         --auth-root-authentication-method=socket >"$BASE/install.log" 2>&1; then
      say "mariadb-install-db failed; see $BASE/install.log"
      tail -20 "$BASE/install.log" >&2
      exit 5
    fi
  fi
  # Runs at every start with full privileges, before clients are accepted:
  # the account and its password are (re)set, so the server is ready for
  # the client as soon as it answers a ping with these credentials.
  local pw
  pw="$(password)"
  cat > "$INIT" <<SQL
CREATE USER IF NOT EXISTS '$USER_NAME'@'127.0.0.1' IDENTIFIED BY '$pw';
CREATE USER IF NOT EXISTS '$USER_NAME'@'localhost' IDENTIFIED BY '$pw';
ALTER USER '$USER_NAME'@'127.0.0.1' IDENTIFIED BY '$pw';
ALTER USER '$USER_NAME'@'localhost' IDENTIFIED BY '$pw';
GRANT ALL PRIVILEGES ON \`lh\\_%\`.* TO '$USER_NAME'@'127.0.0.1';
GRANT ALL PRIVILEGES ON \`lh\\_%\`.* TO '$USER_NAME'@'localhost';
SQL
  chmod 600 "$INIT"
  if [ "${#run_as[@]}" -gt 0 ] && [ "${run_as[0]}" = --user=mysql ]; then
    chown mysql: "$INIT" "$PWFILE"
  fi
  say "starting $mysqld on 127.0.0.1:$PORT (log $LOG)"
  # Defaults for the durability settings (innodb_flush_log_at_trx_commit=1,
  # doublewrite on): the benchmark measures durable writes.
  setsid nohup "$mysqld" --no-defaults "${run_as[@]}" \
    --datadir="$DATA" --port="$PORT" --bind-address=127.0.0.1 \
    --socket="$SOCK" --pid-file="$PIDFILE" --log-error="$LOG" \
    --skip-name-resolve --skip-log-bin --init-file="$INIT" \
    --character-set-server=utf8mb4 --collation-server=utf8mb4_bin \
    --max-connections=1000 --innodb-buffer-pool-size=256M \
    --innodb-log-file-size=256M \
    </dev/null >>"$BASE/stdout.log" 2>&1 &
  local i
  for i in $(seq 1 240); do
    if ping_ok; then
      say "ready after ~$((i / 4)) s"
      url
      return 0
    fi
    if [ "$i" -gt 8 ] && ! running_pid >/dev/null && ! pgrep -f -- "--datadir=$DATA" >/dev/null; then
      say "server exited during start; last lines of $LOG:"
      tail -20 "$LOG" >&2 || true
      exit 6
    fi
    sleep 0.25
  done
  say "not ready after 60 s; last lines of $LOG:"
  tail -20 "$LOG" >&2 || true
  exit 7
}

stop() {
  local pid i
  if ! pid="$(running_pid)"; then
    say "not running"
    return 0
  fi
  say "stopping pid $pid"
  kill -TERM "$pid"
  for i in $(seq 1 240); do
    kill -0 "$pid" 2>/dev/null || { say "stopped"; return 0; }
    sleep 0.25
  done
  say "pid $pid did not stop in 60 s; killing it"
  kill -KILL "$pid" 2>/dev/null || true
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  purge) stop; rm -rf "$BASE"; say "removed $BASE" ;;
  dsn)
    if running_pid >/dev/null && [ -f "$PWFILE" ] && ping_ok; then url; else say "not running (start it first)"; exit 1; fi ;;
  status)
    if pid="$(running_pid)" && ping_ok; then say "running, pid $pid, 127.0.0.1:$PORT, data $DATA"; else say "not running"; exit 1; fi ;;
  *) echo "usage: $0 start|stop|dsn|status|purge" >&2; exit 2 ;;
esac
