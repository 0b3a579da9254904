#!/usr/bin/env bash
# Installs what agentry's tests need and starts their servers, idempotently:
# packages come from Debian (apt-get), servers listen on free loopback ports
# and keep their data in a temporary directory.
#
#   eval "$(scripts/test-deps.sh start)"   # install, start, print the exports
#   scripts/test-deps.sh stop "$AGENTRY_TEST_DEPS"
#
# start prints shell exports on stdout (and progress on stderr):
#   AGENTRY_TEST_DEPS       the temporary directory, for stop
#   AGENTRY_TEST_POSTGRES   a postgres:// URL of an empty database
#   AGENTRY_TEST_REDIS      a redis:// URL of an empty server (append-only
#                           file, fsync on every write)
#   AGENTRY_TEST_CHROMIUM   the path of a headless-capable Chromium, for the
#                           trace viewer's browser tests (server/viewer_test.go)
#   AGENTRY_TEST_NPM        a node_modules of the pinned npm packages the
#                           protocol tests run (the npm "openai" client),
#                           cached outside the repository
#   AGENTRY_TEST_TEMPORAL   the path of the Temporal CLI (pinned, built from the
#                           Go module proxy once, cached outside the repository);
#                           the Temporal tests start its dev server
set -euo pipefail

log() { echo "test-deps: $*" >&2; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

apt_updated=
apt_install() {
  if [ -z "$apt_updated" ]; then
    log "apt-get update"
    as_root apt-get update -qq >&2
    apt_updated=1
  fi
  log "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "$@" >&2
}

pg_bin() {
  local d
  for d in /usr/lib/postgresql/*/bin; do
    if [ -x "$d/postgres" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
      echo "$d"
    fi
  done | sort -V | tail -n 1
}

# chromium_bin prints the path of Debian's Chromium, if it is installed.
chromium_bin() {
  command -v chromium || command -v chromium-browser || true
}

install() {
  local pkgs=()
  [ -n "$(pg_bin)" ] || pkgs+=(postgresql)
  command -v redis-server >/dev/null || pkgs+=(redis-server)
  [ -n "$(chromium_bin)" ] || pkgs+=(chromium)
  command -v node >/dev/null || pkgs+=(nodejs)
  command -v npm >/dev/null || pkgs+=(npm)
  command -v curl >/dev/null || pkgs+=(curl) # docs/guide.md's commands
  command -v jq >/dev/null || pkgs+=(jq)
  if [ ${#pkgs[@]} -gt 0 ]; then
    apt_install "${pkgs[@]}"
  fi
  install_npm
  install_temporal
}

# The Temporal CLI, for its dev server (temporal server start-dev): built
# from the Go module proxy at a pinned version, once, into a cache outside
# the repository. The build uses throwaway module and build caches, so the
# CLI's few gigabytes of dependencies do not stay on the machine.
TEMPORAL_CLI=v1.5.1

temporal_bin() {
  echo "${AGENTRY_TEMPORAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agentry-test-deps/temporal-cli-$TEMPORAL_CLI}/temporal"
}

install_temporal() {
  local bin tmp
  bin=$(temporal_bin)
  [ -x "$bin" ] && return
  log "building the Temporal CLI $TEMPORAL_CLI (a few minutes, once)"
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/agentry-temporal-build.XXXXXX")
  mkdir -p "$(dirname "$bin")"
  if ! GOBIN="$tmp/bin" GOMODCACHE="$tmp/mod" GOCACHE="$tmp/cache" GOFLAGS=-modcacherw GOTOOLCHAIN=local \
    go install -trimpath -ldflags "-s -w" "github.com/temporalio/cli/cmd/temporal@$TEMPORAL_CLI" >&2; then
    rm -rf "$tmp"
    return 1
  fi
  mv "$tmp/bin/temporal" "$bin.part" && mv "$bin.part" "$bin"
  rm -rf "$tmp"
}

# The npm packages the protocol tests run against, pinned with their
# dependencies in scripts/npm (package.json and package-lock.json: the
# OpenAI-compatible endpoints' clients, openai, the Vercel AI SDK and the
# OpenAI Agents SDK; the AG-UI client; the MCP reference servers; the MCP conformance suite and
# the Node 22 it needs), installed
# with npm ci once into a cache outside the repository (AGENTRY_TEST_NPM:
# its node_modules), again when the lockfile changes.
npm_dir() {
  echo "${AGENTRY_NPM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agentry-test-deps/npm}"
}

install_npm() {
  local dir want src
  dir=$(npm_dir)
  src="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/npm"
  want=$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -d' ' -f1)
  if [ -f "$dir/.installed" ] && [ "$(cat "$dir/.installed")" = "$want" ]; then
    return
  fi
  log "npm ci (scripts/npm/package-lock.json)"
  mkdir -p "$dir"
  cp "$src/package.json" "$src/package-lock.json" "$dir/"
  npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error >&2
  echo "$want" >"$dir/.installed"
}

# free_port prints a loopback port nothing listens on.
free_port() {
  local port
  for _ in $(seq 1 50); do
    port=$((20000 + RANDOM % 30000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return
    fi
  done
  log "no free port found"
  return 1
}

start_postgres() {
  local dir=$1 bin run=()
  bin=$(pg_bin)
  # Postgres refuses to run as root: root runs it as the postgres user
  # the package creates.
  if [ "$(id -u)" = 0 ]; then
    run=(runuser -u postgres --)
    chown postgres "$dir"
  fi
  "${run[@]}" "$bin/initdb" -D "$dir/pg" -U agentry -A trust --no-sync -E UTF8 >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; return 1; }
  local port
  for _ in 1 2 3 4 5; do
    port=$(free_port)
    if "${run[@]}" "$bin/pg_ctl" -D "$dir/pg" -l "$dir/pg.log" -w -t 60 \
      -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
      start >&2; then
      echo "export AGENTRY_TEST_POSTGRES='postgres://agentry@127.0.0.1:$port/postgres?sslmode=disable'"
      log "postgres on 127.0.0.1:$port"
      return
    fi
    log "postgres did not start on port $port; trying another"
  done
  cat "$dir/pg.log" >&2
  return 1
}

start_redis() {
  local dir=$1/redis port
  mkdir -p "$dir"
  for _ in 1 2 3 4 5; do
    port=$(free_port)
    redis-server --bind 127.0.0.1 --port "$port" --dir "$dir" --daemonize yes \
      --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" \
      --appendonly yes --appendfsync always --save "" >&2 || true
    for _ in $(seq 1 50); do
      if redis-cli -p "$port" ping >/dev/null 2>&1; then
        echo "export AGENTRY_TEST_REDIS='redis://127.0.0.1:$port/0'"
        log "redis on 127.0.0.1:$port"
        return
      fi
      sleep 0.1
    done
    log "redis did not start on port $port; trying another"
  done
  cat "$dir/redis.log" >&2
  return 1
}

start() {
  install
  local dir
  dir=$(mktemp -d "${TMPDIR:-/tmp}/agentry-test-deps.XXXXXX")
  chmod 755 "$dir"
  echo "export AGENTRY_TEST_DEPS='$dir'"
  start_postgres "$dir"
  start_redis "$dir"
  echo "export AGENTRY_TEST_CHROMIUM='$(chromium_bin)'"
  echo "export AGENTRY_TEST_NPM='$(npm_dir)/node_modules'"
  echo "export AGENTRY_TEST_TEMPORAL='$(temporal_bin)'"
}

stop() {
  local dir=${1:-}
  [ -n "$dir" ] && [ -d "$dir" ] || return 0
  if [ -f "$dir/pg/postmaster.pid" ]; then
    local run=()
    [ "$(id -u)" = 0 ] && run=(runuser -u postgres --)
    "${run[@]}" "$(pg_bin)/pg_ctl" -D "$dir/pg" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  if [ -f "$dir/redis/redis.pid" ]; then
    kill "$(cat "$dir/redis/redis.pid")" 2>/dev/null || true
  fi
  rm -rf "$dir"
}

case "${1:-start}" in
  start) start ;;
  stop) stop "${2:-}" ;;
  install) install ;;
  *) echo "usage: $0 start|stop DIR|install" >&2; exit 2 ;;
esac
