#!/usr/bin/env bash
# engines.sh installs the independent query engines that the engine tests
# (integration/engines_test.go) read cdcsync's Iceberg tables with, into the
# git-ignored .tools/ directory:
#
#   .tools/venv        Python venv: pyspark, duckdb and its iceberg, avro and
#                      httpfs extensions as files, pyiceberg (metadata checks)
#                      (integration/engines/requirements.txt, pinned with hashes)
#   .tools/jars        Iceberg Spark runtime, Iceberg AWS bundle and the SQLite
#                      and PostgreSQL JDBC drivers, from Maven Central, checked
#                      against pinned SHA-256 sums
#   .tools/engines.json  what was installed, read by the Go test
#
# With CDCSYNC_TRINO=1 it also installs Trino (server tarball, 820 MB, and
# CLI) into .tools/trino and looks for a JDK 24+ for it.
#
# It is idempotent and cached: a second run checks stamps and sums and
# downloads nothing. Nothing is downloaded at test time (DuckDB loads its
# extensions from the installed files; Spark gets its jars via spark.jars).
#
# Environment:
#   MAVEN_CENTRAL      base URL of the Maven repository (default: Maven Central)
#   CDCSYNC_PYTHON     Python 3.10+ used to create the venv (default: python3)
#   CDCSYNC_TRINO=1    also install Trino (optional, see docs/query.md)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="$REPO/.tools"
VENV="$TOOLS/venv"
JARS="$TOOLS/jars"
REQS="$REPO/integration/engines/requirements.txt"
MAVEN_CENTRAL="${MAVEN_CENTRAL:-https://repo.maven.apache.org/maven2}"
PYTHON="${CDCSYNC_PYTHON:-python3}"

# Pinned versions. The Python side (pyspark, duckdb) is pinned in $REQS.
ICEBERG_VERSION="1.11.0" # newest release with a Spark 4.0 runtime (1.12 has none)
SQLITE_JDBC_VERSION="3.54.1.0"
POSTGRES_JDBC_VERSION="42.7.14"
TRINO_VERSION="476"

# group/artifact/version/file and its SHA-256.
JAR_LIST=(
	"org/apache/iceberg/iceberg-spark-runtime-4.0_2.13/$ICEBERG_VERSION/iceberg-spark-runtime-4.0_2.13-$ICEBERG_VERSION.jar 63c3b812549dc232c1920865ff42436df8604a9bbacd693930985c06bd97e6dc"
	"org/apache/iceberg/iceberg-aws-bundle/$ICEBERG_VERSION/iceberg-aws-bundle-$ICEBERG_VERSION.jar 38f01da7e96850cdd05e6616d758b77b43314b712a8808e3f9a824d56976162f"
	"org/xerial/sqlite-jdbc/$SQLITE_JDBC_VERSION/sqlite-jdbc-$SQLITE_JDBC_VERSION.jar f8dce420a6016278497f4f0560f65602b9db858de141b541cf91a4644ebe4639"
	"org/postgresql/postgresql/$POSTGRES_JDBC_VERSION/postgresql-$POSTGRES_JDBC_VERSION.jar 73914527305a40cce504b0d3d90b23caf565136912d607ae8ae7c5895512332c"
)
TRINO_SERVER="io/trino/trino-server/$TRINO_VERSION/trino-server-$TRINO_VERSION.tar.gz"
TRINO_CLI="io/trino/trino-cli/$TRINO_VERSION/trino-cli-$TRINO_VERSION-executable.jar"

say() { printf 'engines.sh: %s\n' "$*"; }
die() {
	printf 'engines.sh: %s\n' "$*" >&2
	exit 1
}

sha256() { sha256sum "$1" | awk '{print $1}'; }

# fetch PATH SHA256 DEST downloads PATH from Maven Central into DEST unless
# DEST already has that SHA-256. An empty SHA256 checks the .sha1 file the
# repository publishes instead.
fetch() {
	local path="$1" want="$2" dest="$3"
	if [ -f "$dest" ] && { [ -z "$want" ] || [ "$(sha256 "$dest")" = "$want" ]; }; then
		return
	fi
	say "downloading $(basename "$dest")"
	mkdir -p "$(dirname "$dest")"
	local tmp="$dest.part"
	curl -fsSL --retry 3 --retry-delay 2 -o "$tmp" "$MAVEN_CENTRAL/$path" || die "cannot download $MAVEN_CENTRAL/$path"
	if [ -n "$want" ]; then
		local got
		got="$(sha256 "$tmp")"
		[ "$got" = "$want" ] || die "$(basename "$dest"): SHA-256 $got, want $want"
	else
		local sha1
		sha1="$(curl -fsSL --retry 3 "$MAVEN_CENTRAL/$path.sha1" | awk '{print $1}')" || die "cannot download $path.sha1"
		[ "$(sha1sum "$tmp" | awk '{print $1}')" = "$sha1" ] || die "$(basename "$dest"): SHA-1 does not match $path.sha1"
	fi
	mv "$tmp" "$dest"
}

# java_major JAVA prints the feature version of a java binary (17, 21, 25...).
java_major() {
	"$1" -XshowSettings:properties -version 2>&1 | awk -F'= ' '/java.specification.version/ { print $2; exit }'
}

# find_java MIN MAX prints a JAVA_HOME whose java has MIN <= version <= MAX,
# preferring $JAVA_HOME, then java on PATH, then /usr/lib/jvm/* and /opt/*.
find_java() {
	local min="$1" max="$2" cand home v
	local cands=()
	[ -n "${JAVA_HOME:-}" ] && cands+=("$JAVA_HOME")
	if command -v java >/dev/null 2>&1; then
		cands+=("$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")")
	fi
	for cand in /usr/lib/jvm/* /opt/* /opt/java/*; do
		[ -x "$cand/bin/java" ] && cands+=("$cand")
	done
	for home in "${cands[@]}"; do
		[ -x "$home/bin/java" ] || continue
		v="$(java_major "$home/bin/java")"
		v="${v%%.*}"
		[ -n "$v" ] || continue
		if [ "$v" -ge "$min" ] && [ "$v" -le "$max" ]; then
			readlink -f "$home"
			return
		fi
	done
}

start=$(date +%s)

# --- Python venv -----------------------------------------------------------
command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found: install Python 3.10 or newer (or set CDCSYNC_PYTHON)"
stamp="$VENV/.cdcsync-requirements.sha256"
want_stamp="$(sha256 "$REQS") $("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
if [ -x "$VENV/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want_stamp" ]; then
	say "venv up to date: $VENV"
else
	say "creating $VENV (pyspark, duckdb; first time: about a minute)"
	rm -rf "$VENV"
	"$PYTHON" -m venv "$VENV" || die "cannot create a venv with $PYTHON (Debian: apt-get install python3-venv)"
	"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --require-hashes -r "$REQS" ||
		die "pip install -r $REQS failed"
	echo "$want_stamp" >"$stamp"
fi

# --- Jars for Spark ---------------------------------------------------------
jar_paths=()
for entry in "${JAR_LIST[@]}"; do
	path="${entry%% *}"
	sum="${entry##* }"
	dest="$JARS/$(basename "$path")"
	fetch "$path" "$sum" "$dest"
	jar_paths+=("$dest")
done
say "jars up to date: $JARS"

# --- Java -------------------------------------------------------------------
# Spark 4.0 runs on Java 17 and 21.
spark_java="$(find_java 17 21)"
if [ -z "$spark_java" ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
	say "no Java 17 or 21: apt-get install openjdk-17-jre-headless"
	apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends openjdk-17-jre-headless >/dev/null
	spark_java="$(find_java 17 21)"
fi
[ -n "$spark_java" ] || die "no Java 17 or 21 found for Spark 4.0 (apt-get install openjdk-17-jre-headless, or set JAVA_HOME)"
say "Java for Spark: $spark_java ($(java_major "$spark_java/bin/java"))"

# --- Trino (optional) ---------------------------------------------------------
trino_home=""
trino_cli=""
trino_java=""
if [ "${CDCSYNC_TRINO:-}" = "1" ]; then
	trino_java="$(find_java 24 99)"
	[ -n "$trino_java" ] || die "Trino $TRINO_VERSION needs Java 24 or newer; none found under /usr/lib/jvm or /opt (set JAVA_HOME)"
	trino_home="$TOOLS/trino/trino-server-$TRINO_VERSION"
	if [ ! -x "$trino_home/bin/launcher" ]; then
		tarball="$TOOLS/trino/trino-server-$TRINO_VERSION.tar.gz"
		fetch "$TRINO_SERVER" "" "$tarball"
		say "unpacking Trino $TRINO_VERSION"
		rm -rf "$trino_home"
		tar -xzf "$tarball" -C "$TOOLS/trino"
		rm -f "$tarball"
		# The tests need only the Iceberg connector; the other 50-odd
		# plugins would cost start-up time and 800 MB of disk.
		find "$trino_home/plugin" -mindepth 1 -maxdepth 1 ! -name iceberg -exec rm -rf {} +
	fi
	trino_cli="$TOOLS/trino/trino-cli-$TRINO_VERSION-executable.jar"
	fetch "$TRINO_CLI" "" "$trino_cli"
	say "Trino $TRINO_VERSION in $trino_home, Java $trino_java"
elif [ -x "$TOOLS/trino/trino-server-$TRINO_VERSION/bin/launcher" ]; then
	# Installed by an earlier CDCSYNC_TRINO=1 run: keep it in the manifest.
	trino_java="$(find_java 24 99)"
	if [ -n "$trino_java" ]; then
		trino_home="$TOOLS/trino/trino-server-$TRINO_VERSION"
		trino_cli="$TOOLS/trino/trino-cli-$TRINO_VERSION-executable.jar"
	fi
fi

# --- Manifest for the Go test -------------------------------------------------
"$VENV/bin/python" - "$TOOLS/engines.json" "$VENV/bin/python" "$spark_java" "$ICEBERG_VERSION" \
	"$trino_home" "$trino_cli" "$trino_java" "$TRINO_VERSION" "${jar_paths[@]}" <<'EOF'
import json, sys, importlib.metadata as md
out, python, spark_java, iceberg, trino_home, trino_cli, trino_java, trino_version = sys.argv[1:9]
jars = sys.argv[9:]
v = lambda p: md.version(p)
manifest = {
    "python": python,
    "spark": {"pyspark": v("pyspark"), "iceberg": iceberg, "java_home": spark_java, "jars": jars},
    "duckdb": {"duckdb": v("duckdb"), "iceberg_extension": v("duckdb-extension-iceberg")},
    "pyiceberg": v("pyiceberg"),
}
if trino_home:
    manifest["trino"] = {"version": trino_version, "home": trino_home, "cli": trino_cli, "java_home": trino_java}
with open(out + ".tmp", "w") as f:
    json.dump(manifest, f, indent=2)
import os
os.replace(out + ".tmp", out)
print("engines.sh: pyspark %s (Iceberg %s), duckdb %s (iceberg extension %s), pyiceberg %s%s" % (
    v("pyspark"), iceberg, v("duckdb"), v("duckdb-extension-iceberg"), v("pyiceberg"),
    ", trino %s" % trino_version if trino_home else ""))
EOF
say "done in $(($(date +%s) - start))s; manifest $TOOLS/engines.json"
