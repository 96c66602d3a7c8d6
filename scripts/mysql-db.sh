#!/bin/bash
# Create or drop a database on the MySQL/MariaDB server named by
# LEASEHOLD_TEST_MYSQL_DSN (mysql+pymysql://user:pw@host:port/, as printed
# by scripts/mariadb-throwaway.sh), with the mariadb command-line client.
#
#   scripts/mysql-db.sh create PREFIX   # creates PREFIX<random>, prints its URL
#   scripts/mysql-db.sh drop URL|NAME   # drops it
#
# The password must not need URL-escaping (the throw-away server's is hex).
set -euo pipefail
server="${LEASEHOLD_TEST_MYSQL_DSN:-}"
re='^(mysql|mariadb)(\+[a-z0-9]+)?://([^:@/]+)(:([^@/]*))?@([^:/]+)(:([0-9]+))?/?'
if [[ ! "$server" =~ $re ]]; then
  echo "mysql-db: LEASEHOLD_TEST_MYSQL_DSN must be mysql+pymysql://user:pw@host:port/ (${server:+set but unparsable}${server:-unset})" >&2
  exit 2
fi
user="${BASH_REMATCH[3]}" pw="${BASH_REMATCH[5]}" host="${BASH_REMATCH[6]}" port="${BASH_REMATCH[8]:-3306}"
# scheme://user:pw@host:port/ (the database named in the URL, if any, and
# its query are dropped).
base="${BASH_REMATCH[0]%/}/"
client="$(command -v mariadb || command -v mysql || true)"
if [ -z "$client" ]; then
  echo "mysql-db: mariadb client not installed (apt-get install mariadb-client)" >&2
  exit 2
fi
sql() { MYSQL_PWD="$pw" "$client" --no-defaults --protocol=tcp -h"$host" -P"$port" -u"$user" -e "$1"; }
case "${1:-}" in
  create)
    name="${2:?prefix}$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    sql "CREATE DATABASE \`$name\` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
    echo "$base$name"
    ;;
  drop)
    name="${2:?url or name}"
    name="${name##*/}"
    name="${name%%\?*}"
    [[ "$name" =~ ^[A-Za-z0-9_]+$ ]] || { echo "mysql-db: bad database name '$name'" >&2; exit 2; }
    sql "DROP DATABASE IF EXISTS \`$name\`"
    ;;
  *) echo "usage: $0 create PREFIX | drop URL|NAME" >&2; exit 2 ;;
esac
