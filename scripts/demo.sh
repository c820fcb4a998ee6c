#!/usr/bin/env bash
# A guided demo of cdcsync on its embedded default: a local warehouse
# directory and a SQLite catalog, mirroring a private MariaDB.
#
# What it does (everything lives in .demo/, which is git-ignored):
#   1. installs mariadb-server/-client and curl if missing (Debian, as root);
#   2. builds .demo/cdcsync;
#   3. starts a private MariaDB on 127.0.0.1:3417 (CDCSYNC_DEMO_MYSQL_PORT)
#      with the binlog on (ROW, FULL row image and metadata, GTIDs), data in
#      .demo/mariadb;
#   4. loads a small sample schema `shop` (customers, orders);
#   5. writes .demo/cdcsync.yaml, runs `cdcsync check`, then `cdcsync run` in
#      the background (log: .demo/cdcsync.log, HTTP on 127.0.0.1:9417,
#      CDCSYNC_DEMO_HTTP_PORT);
#   6. makes a few changes in MariaDB and shows the mirrored Iceberg rows
#      (`cdcsync tables`, `cdcsync cat`) next to the rows in MariaDB;
#   7. stops cdcsync (SIGTERM) and MariaDB.
# Each run starts from scratch. Exits non-zero when a step fails.
#
# Environment:
#   CDCSYNC_DEMO_MYSQL_PORT  the demo MariaDB's port (default 3417)
#   CDCSYNC_DEMO_HTTP_PORT   cdcsync's HTTP port, /metrics and /readyz (default 9417)
#   CDCSYNC_DEMO_PASSWORD    the password of the demo's MariaDB account `cdcsync`
#                            (cdcsync.yaml reads it with ${CDCSYNC_DEMO_PASSWORD})
#   CDCSYNC_BIN              an existing cdcsync binary to run instead of building one
# e.g. CDCSYNC_DEMO_MYSQL_PORT=13306 CDCSYNC_DEMO_HTTP_PORT=19187 bash scripts/demo.sh
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEMO="$REPO/.demo"
MDIR="$DEMO/mariadb"
PORT="${CDCSYNC_DEMO_MYSQL_PORT:-3417}"
HTTP_PORT="${CDCSYNC_DEMO_HTTP_PORT:-9417}"
HTTP_ADDR="127.0.0.1:$HTTP_PORT"
CFG="$DEMO/cdcsync.yaml"
export CDCSYNC_DEMO_PASSWORD="${CDCSYNC_DEMO_PASSWORD:-cdcsync-demo-secret}"

MARIADB_PID=""
CDCSYNC_PID=""

if [ -t 1 ]; then
	BOLD=$'\033[1m' PLAIN=$'\033[0m'
else
	BOLD="" PLAIN=""
fi

step() {
	printf '\n%s==> %s%s\n' "$BOLD" "$*" "$PLAIN"
}

die() {
	printf '\ndemo.sh: %s\n' "$*" >&2
	exit 1
}

# check_port NAME VALUE refuses a VALUE that is not a TCP port.
check_port() {
	if ! [[ "$2" =~ ^[0-9]+$ ]] || [ "$2" -lt 1 ] || [ "$2" -gt 65535 ]; then
		die "$1=$2 is not a TCP port: set it to a number from 1 to 65535"
	fi
}

as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo "$@"
	else
		die "need root to run: $*"
	fi
}

# find_bin NAME prints the path of NAME from PATH, /usr/sbin or /usr/bin.
find_bin() {
	if command -v "$1" 2>/dev/null; then
		return
	fi
	for d in /usr/sbin /usr/bin; do
		if [ -x "$d/$1" ]; then
			echo "$d/$1"
			return
		fi
	done
	return 1
}

# sql runs the mariadb client as root against the demo server.
sql() {
	"$MARIADB" --no-defaults --protocol=TCP -h127.0.0.1 -P"$PORT" -uroot "$@"
}

# port_open HOST PORT succeeds when something accepts TCP connections there.
port_open() {
	(exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

# stop_pid PID NAME sends SIGTERM, waits up to 60 s, then SIGKILL.
stop_pid() {
	local pid="$1" name="$2" i
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 600; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	echo "$name (pid $pid) did not exit within 60 s of SIGTERM; killing it" >&2
	kill -KILL "$pid" 2>/dev/null || true
}

# stop_previous PIDFILE PATTERN stops a process left by an earlier run, if
# the pid file names a live process whose command line matches PATTERN.
stop_previous() {
	local pidfile="$1" pattern="$2" pid
	[ -f "$pidfile" ] || return 0
	pid="$(cat "$pidfile" 2>/dev/null || true)"
	if [[ "$pid" =~ ^[0-9]+$ ]] && [ -r "/proc/$pid/cmdline" ] &&
		tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$pattern"; then
		echo "stopping the $pattern left by a previous run (pid $pid)"
		stop_pid "$pid" "$pattern"
	fi
	rm -f "$pidfile"
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ -n "$CDCSYNC_PID" ] && kill -0 "$CDCSYNC_PID" 2>/dev/null; then
		echo "stopping cdcsync (pid $CDCSYNC_PID)"
		stop_pid "$CDCSYNC_PID" cdcsync
	fi
	if [ -n "$MARIADB_PID" ] && kill -0 "$MARIADB_PID" 2>/dev/null; then
		echo "stopping MariaDB (pid $MARIADB_PID)"
		stop_pid "$MARIADB_PID" mariadbd
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

check_port CDCSYNC_DEMO_MYSQL_PORT "$PORT"
check_port CDCSYNC_DEMO_HTTP_PORT "$HTTP_PORT"
if [ "$PORT" = "$HTTP_PORT" ]; then
	die "CDCSYNC_DEMO_MYSQL_PORT and CDCSYNC_DEMO_HTTP_PORT are both $PORT: give them different ports"
fi

cd "$REPO"

step "Installing MariaDB and curl if missing"
pkgs=()
find_bin mariadbd >/dev/null || pkgs+=(mariadb-server)
find_bin mariadb >/dev/null || pkgs+=(mariadb-client)
command -v curl >/dev/null 2>&1 || pkgs+=(curl ca-certificates)
if [ "${#pkgs[@]}" -gt 0 ]; then
	echo "apt-get install: ${pkgs[*]}"
	as_root apt-get update
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${pkgs[@]}"
else
	echo "already installed"
fi
MARIADBD="$(find_bin mariadbd)" || die "mariadbd not found after installing mariadb-server"
INSTALL_DB="$(find_bin mariadb-install-db)" || die "mariadb-install-db not found after installing mariadb-server"
MARIADB="$(find_bin mariadb)" || die "mariadb (the client) not found after installing mariadb-client"
"$MARIADBD" --version

mkdir -p "$DEMO"
step "Stopping what a previous demo left running, starting from scratch"
stop_previous "$DEMO/cdcsync.pid" "cdcsync run"
stop_previous "$MDIR/mariadbd.pid" "mariadbd"
rm -rf "$MDIR" "$DEMO/warehouse" "$DEMO/catalog.db" "$DEMO/catalog.db-"* "$DEMO/cdcsync.log"
echo "cleaned .demo/"

if [ -n "${CDCSYNC_BIN:-}" ]; then
	step "Using the cdcsync binary $CDCSYNC_BIN"
	rm -f "$DEMO/cdcsync"
	cp "$CDCSYNC_BIN" "$DEMO/cdcsync"
	echo "copied to $DEMO/cdcsync"
else
	step "Building cdcsync (go build -o .demo/cdcsync ./cmd/cdcsync; the first build takes a few minutes)"
	command -v go >/dev/null 2>&1 || die "go not found: install Go $(awk '$1 == "go" { print $2 }' go.mod) or newer (https://go.dev/dl/)"
	rm -f "$DEMO/cdcsync" # go build refuses to overwrite a file that is not a Go binary
	go build -o "$DEMO/cdcsync" ./cmd/cdcsync
	echo "built $DEMO/cdcsync"
fi

step "Starting a private MariaDB on 127.0.0.1:$PORT (binlog on: ROW, FULL image, FULL metadata, GTIDs)"
if port_open 127.0.0.1 "$PORT"; then
	die "port $PORT is already in use by another process; stop it, or choose another port with CDCSYNC_DEMO_MYSQL_PORT=N, and run the demo again"
fi
if port_open 127.0.0.1 "$HTTP_PORT"; then
	die "port $HTTP_PORT (cdcsync's HTTP endpoint) is already in use; stop that process, or choose another port with CDCSYNC_DEMO_HTTP_PORT=N, and run the demo again"
fi
mkdir -p "$MDIR"
SOCKET="$MDIR/sock"
if [ "${#SOCKET}" -ge 100 ]; then
	SOCKET="/tmp/cdcsync-demo-$PORT.sock" # unix socket paths are limited to 108 bytes
fi
user_args=()
if [ "$(id -u)" -eq 0 ]; then
	user_args=(--user=root)
fi
if ! "$INSTALL_DB" --no-defaults "${user_args[@]}" --datadir="$MDIR/data" \
	--auth-root-authentication-method=normal --skip-test-db --skip-name-resolve \
	>"$MDIR/install.log" 2>&1; then
	tail -n 30 "$MDIR/install.log" >&2
	die "mariadb-install-db failed (log: $MDIR/install.log)"
fi
# The same flags as integration/testenv uses for the test servers.
"$MARIADBD" --no-defaults "${user_args[@]}" \
	--datadir="$MDIR/data" --port="$PORT" --socket="$SOCKET" --bind-address=127.0.0.1 \
	--log-bin="$MDIR/data/binlog" --binlog-format=ROW --binlog-row-image=FULL \
	--binlog-row-metadata=FULL --server-id=1 --skip-name-resolve \
	--log-error="$MDIR/error.log" --pid-file="$MDIR/mariadbd.pid" \
	--innodb-buffer-pool-size=128M --max-connections=200 \
	--character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
	</dev/null >"$MDIR/mariadbd.out" 2>&1 &
MARIADB_PID=$!
ready=""
for ((i = 0; i < 600; i++)); do
	if ! kill -0 "$MARIADB_PID" 2>/dev/null; then
		break
	fi
	if sql -e 'SELECT 1' >/dev/null 2>&1; then
		ready=1
		break
	fi
	sleep 0.1
done
if [ -z "$ready" ]; then
	tail -n 30 "$MDIR/error.log" >&2 || true
	die "MariaDB did not start within 60 s (log: $MDIR/error.log)"
fi
sql -N -e 'SELECT CONCAT("MariaDB ", VERSION(), " ready: log_bin=", @@log_bin, " binlog_format=", @@binlog_format, " binlog_row_image=", @@binlog_row_image)'

step "Creating the replication account cdcsync (SELECT, REPLICATION SLAVE, REPLICATION CLIENT)"
# The password goes to the client on stdin: it is neither printed nor on a
# command line. Quote it as an SQL string literal (double ' and \).
pw_sql="$(printf '%s' "$CDCSYNC_DEMO_PASSWORD" | sed -e 's/\\/\\\\/g' -e "s/'/''/g")"
sql <<SQL
CREATE USER 'cdcsync'@'%' IDENTIFIED BY '$pw_sql';
GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'cdcsync'@'%';
SQL
sql -N -e "SHOW GRANTS FOR 'cdcsync'@'%'" | sed -e 's/ IDENTIFIED BY PASSWORD .*//'
echo "as cdcsync: SHOW MASTER STATUS"
MYSQL_PWD="$CDCSYNC_DEMO_PASSWORD" "$MARIADB" --no-defaults --protocol=TCP -h127.0.0.1 -P"$PORT" -ucdcsync -t -e 'SHOW MASTER STATUS'

step "Loading the sample schema shop: customers and orders"
sql <<'SQL'
CREATE DATABASE shop;
USE shop;
CREATE TABLE customers (
  id         INT PRIMARY KEY,
  name       VARCHAR(100),
  email      VARCHAR(200),
  created_at DATETIME(6)
);
CREATE TABLE orders (
  id          BIGINT PRIMARY KEY AUTO_INCREMENT,
  customer_id INT,
  amount      DECIMAL(12,2),
  status      VARCHAR(20),
  created_at  TIMESTAMP(6) DEFAULT CURRENT_TIMESTAMP(6)
);
INSERT INTO customers VALUES
  (1,  'Ada Lovelace',      'ada@example.com',      '2024-01-05 09:00:00.000000'),
  (2,  'Alan Turing',       'alan@example.com',     '2024-01-06 10:30:00.250000'),
  (3,  'Grace Hopper',      'grace@example.com',    '2024-01-07 11:15:00.000000'),
  (4,  'Edsger Dijkstra',   'edsger@example.com',   '2024-01-08 08:45:12.500000'),
  (5,  'Barbara Liskov',    'barbara@example.com',  '2024-01-09 14:00:00.000000'),
  (6,  'Donald Knuth',      'don@example.com',      '2024-01-10 16:20:00.000001'),
  (7,  'Margaret Hamilton', 'margaret@example.com', '2024-01-11 07:05:00.000000'),
  (8,  'Ken Thompson',      'ken@example.com',      '2024-01-12 12:00:00.000000'),
  (9,  'Frances Allen',     'frances@example.com',  '2024-01-13 09:30:00.000000'),
  (10, 'John McCarthy',     'john@example.com',     '2024-01-14 18:45:00.000000'),
  (11, 'Radia Perlman',     'radia@example.com',    '2024-01-15 13:10:00.000000'),
  (12, 'Leslie Lamport',    'leslie@example.com',   NULL);
-- 18 orders from MariaDB's SEQUENCE engine (seq_1_to_18 yields 1..18); with the
-- changes below the table keeps under 20 rows, so `cdcsync cat --limit 20` shows them all.
INSERT INTO orders (customer_id, amount, status, created_at)
SELECT 1 + seq % 12,
       ROUND(9.90 + (seq * 37) % 250 + (seq % 7) * 0.15, 2),
       ELT(1 + seq % 3, 'new', 'paid', 'shipped'),
       TIMESTAMP '2024-03-01 10:00:00' + INTERVAL seq * 97 MINUTE
FROM seq_1_to_18;
SQL
sql -N -e 'SELECT CONCAT("shop.customers: ", (SELECT COUNT(*) FROM shop.customers), " rows, shop.orders: ", (SELECT COUNT(*) FROM shop.orders), " rows, GTID position ", @@gtid_binlog_pos)'

step "Writing .demo/cdcsync.yaml"
cat >"$CFG" <<YAML
pipeline: demo
source:
  host: 127.0.0.1
  port: $PORT
  user: cdcsync
  password: \${CDCSYNC_DEMO_PASSWORD}
  server_id: 4242
  include: ["shop.*"]
warehouse:
  location: ./warehouse         # relative to the config file
catalog:
  type: sql
  name: cdcsync
  sql: {driver: sqlite, dsn: ./catalog.db}
epoch:
  interval: 1s
http:
  listen: $HTTP_ADDR
YAML
cat "$CFG"

cd "$DEMO"

step "cdcsync check --config cdcsync.yaml (checks the server, the tables, the catalog and the warehouse)"
./cdcsync check --config cdcsync.yaml

step "cdcsync run --config cdcsync.yaml, in the background (log: .demo/cdcsync.log)"
./cdcsync run --config cdcsync.yaml </dev/null >cdcsync.log 2>&1 &
CDCSYNC_PID=$!
echo "$CDCSYNC_PID" >cdcsync.pid
echo "pid $CDCSYNC_PID; waiting for http://$HTTP_ADDR/readyz (initial copy done, binlog streaming)"
ready=""
for ((i = 0; i < 120; i++)); do
	if ! kill -0 "$CDCSYNC_PID" 2>/dev/null; then
		break
	fi
	if curl -fs -o /dev/null "http://$HTTP_ADDR/readyz"; then
		ready=1
		break
	fi
	sleep 0.5
done
if [ -z "$ready" ]; then
	echo "--- tail of .demo/cdcsync.log" >&2
	tail -n 40 cdcsync.log >&2 || true
	if kill -0 "$CDCSYNC_PID" 2>/dev/null; then
		die "cdcsync was not ready within 60 s"
	fi
	wait "$CDCSYNC_PID" && rc=0 || rc=$?
	CDCSYNC_PID=""
	die "cdcsync run exited with status $rc before it was ready"
fi
echo "ready"

step "Changing rows in MariaDB, in four transactions"
changes() {
	cat <<'SQL'
-- 1. a new customer and two orders
BEGIN;
INSERT INTO shop.customers VALUES (13, 'Katherine Johnson', 'katherine@example.com', NOW(6));
INSERT INTO shop.orders (customer_id, amount, status) VALUES (13, 120.00, 'new'), (13, 75.50, 'new');
COMMIT;
-- 2. one UPDATE that changes two rows
BEGIN;
UPDATE shop.orders SET status = 'shipped' WHERE id IN (1, 2);
COMMIT;
-- 3. a DELETE
BEGIN;
DELETE FROM shop.orders WHERE id = 3;
COMMIT;
-- 4. two tables in one transaction
BEGIN;
UPDATE shop.customers SET email = 'alan.turing@example.org' WHERE id = 2;
UPDATE shop.orders SET amount = amount + 10.00, status = 'paid' WHERE id = 4;
COMMIT;
SQL
}
changes
changes | sql
sql -N -e 'SELECT CONCAT("GTID position after the changes: ", @@gtid_binlog_pos)'

step "Waiting 4 s for cdcsync to commit (epoch interval: 1 s)"
sleep 4
kill -0 "$CDCSYNC_PID" 2>/dev/null || {
	tail -n 40 cdcsync.log >&2
	die "cdcsync run stopped"
}

step "cdcsync tables --config cdcsync.yaml (the Iceberg tables and their committed positions)"
./cdcsync tables --config cdcsync.yaml

step "cdcsync cat --config cdcsync.yaml shop.orders --limit 20 (read through Iceberg)"
./cdcsync cat --config cdcsync.yaml shop.orders --limit 20

step "The same rows in MariaDB"
sql -t -e 'SELECT id, customer_id, amount, status, created_at FROM shop.orders ORDER BY id LIMIT 20'

step "Stopping cdcsync (SIGTERM) and MariaDB"
kill -TERM "$CDCSYNC_PID"
wait "$CDCSYNC_PID" && rc=0 || rc=$?
CDCSYNC_PID=""
rm -f cdcsync.pid
if [ "$rc" -ne 0 ]; then
	tail -n 20 cdcsync.log >&2
	die "cdcsync exited with status $rc after SIGTERM"
fi
echo "cdcsync stopped cleanly"
kill -TERM "$MARIADB_PID"
wait "$MARIADB_PID" || true
MARIADB_PID=""
echo "MariaDB stopped"

step "Done"
cat <<EOF
The Iceberg warehouse is in .demo/warehouse and its SQLite catalog in
.demo/catalog.db (catalog name cdcsync); the daemon's log is .demo/cdcsync.log.
To mirror your own MySQL, start from cdcsync.example.yaml and docs/configuration.md.
EOF
