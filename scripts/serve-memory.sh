#!/usr/bin/env bash
# serve-memory.sh: where a served agentry's memory goes under the servers
# benchmark's load (../shared/bench/servers: N runs at once, each two
# turns of a scripted model with one tool call between them). It serves
# the benchmark's agent from a fresh build, samples the process's
# RssFile (the binary's pages mapped in) and RssAnon (what it allocated)
# every 10 ms through the load, and prints their peaks beside the
# benchmark's own line. A measurement, not a test. Run from the project
# root; GOMEMLIMIT and the like pass through to the server.
#
#   scripts/serve-memory.sh [N]        # N runs at once, default 1000
set -euo pipefail
n=${1:-1000}
bench=$(cd ../shared/bench/servers && pwd)
work=$(mktemp -d)
pid= sampler=
trap 'kill $pid 2>/dev/null || true; wait $sampler 2>/dev/null || true; rm -rf "$work"' EXIT
go build -o "$work/agentry" ./cmd/agentry
(cd "$bench" && go build -o "$work/loadgen" ./loadgen)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
(cd "$bench/agentry" && exec "$work/agentry" serve --agents agents --addr "127.0.0.1:$port" --db "$work/runs.db" --max-runs 2000) 2>"$work/serve.log" &
pid=$!
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/readyz" && break; sleep 0.1; done
rss() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$pid/status"; }
echo "at rest: binary's pages $(( $(rss RssFile) / 1024 )) MiB, allocated $(( $(rss RssAnon) / 1024 )) MiB"
(
  file=0 anon=0
  while kill -0 "$pid" 2>/dev/null; do
    f=$(rss RssFile 2>/dev/null || echo 0) a=$(rss RssAnon 2>/dev/null || echo 0)
    file=$(( f > file ? f : file )) anon=$(( a > anon ? a : anon ))
    echo "$file $anon" >"$work/peak"
    sleep 0.01
  done
) &
sampler=$!
"$work/loadgen" -kind agentry -url "http://127.0.0.1:$port" -n "$n" -pid "$pid" -label agentry-sqlite -round 1
read -r file anon <"$work/peak"
echo "at the peak: binary's pages $((file / 1024)) MiB, allocated $((anon / 1024)) MiB"
