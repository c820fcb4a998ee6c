#!/usr/bin/env bash
# rest-catalog.sh installs the Iceberg REST catalog server that the REST
# catalog integration tests (integration/rest_test.go) run: Apache Iceberg's
# own REST fixture, org.apache.iceberg.rest.RESTCatalogServer, with the
# classpath that integration/restcatalog/pom.xml resolves (pinned versions,
# from Maven Central), copied into the git-ignored .tools/rest-catalog.
#
# It is idempotent and cached: when .tools/rest-catalog/.stamp matches the
# SHA-256 of the pom, nothing runs (not even Maven). Nothing is downloaded at
# test time; integration/testenv/rest.go starts
#   java -cp '.tools/rest-catalog/*' org.apache.iceberg.rest.RESTCatalogServer
#
# Needs Java 17+ (the server) and Maven 3 (the install); on Debian 12 both
# are installed from apt when missing and this runs as root.
#
# Environment:
#   CDCSYNC_REST_CATALOG_JARS  install into this directory instead (the tests
#                              read the same variable)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
POM="$REPO/integration/restcatalog/pom.xml"
DEST="${CDCSYNC_REST_CATALOG_JARS:-$REPO/.tools/rest-catalog}"
STAMP="$DEST/.stamp"

say() { printf 'rest-catalog.sh: %s\n' "$*"; }
die() {
	printf 'rest-catalog.sh: %s\n' "$*" >&2
	exit 1
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

# java_major prints the feature version of java on PATH (17, 21, ...).
java_major() {
	java -XshowSettings:properties -version 2>&1 | awk -F'= ' '/java.specification.version/ { print $2; exit }'
}

pkgs=()
if ! command -v java >/dev/null 2>&1 || [ "$(java_major | cut -d. -f1)" -lt 17 ]; then
	pkgs+=(openjdk-17-jre-headless)
fi
command -v mvn >/dev/null 2>&1 || pkgs+=(maven)
if [ "${#pkgs[@]}" -gt 0 ]; then
	command -v apt-get >/dev/null 2>&1 || die "need ${pkgs[*]}: install Java 17+ and Maven 3"
	say "apt-get install: ${pkgs[*]}"
	as_root apt-get update
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${pkgs[@]}"
fi

want="$(sha256sum "$POM" | awk '{print $1}')"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && compgen -G "$DEST/iceberg-open-api-*-test-fixtures.jar" >/dev/null; then
	say "up to date: $DEST ($(find "$DEST" -name '*.jar' | wc -l) jars)"
	exit 0
fi

start=$(date +%s)
say "copying the REST catalog server's classpath into $DEST (first time: about 100 MB from Maven Central)"
tmp="$DEST.tmp"
rm -rf "$tmp"
# Maven's output is shown only when it fails (with -q, Maven 3.8 still
# prints stray colour escapes).
if ! out="$(mvn -q -B -f "$POM" dependency:copy-dependencies -DoutputDirectory="$tmp" 2>&1)"; then
	printf '%s\n' "$out" >&2
	die "mvn dependency:copy-dependencies failed for $POM (is Maven Central reachable? see ~/.m2/settings.xml for a mirror or proxy)"
fi
compgen -G "$tmp/iceberg-open-api-*-test-fixtures.jar" >/dev/null || die "$tmp holds no iceberg-open-api test-fixtures jar"
echo "$want" >"$tmp/.stamp"
rm -rf "$DEST"
mv "$tmp" "$DEST"
say "installed $(find "$DEST" -name '*.jar' | wc -l) jars ($(du -sh "$DEST" | awk '{print $1}')) in $(($(date +%s) - start)) s"
