#!/usr/bin/env bash
# Runs every check and test of agentry, as CI does: formatting, vet, and
# the whole test suite with the race detector. Usage: scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# The servers the tests use (Postgres), installed if missing and started
# on free loopback ports; stopped when this script ends, however it ends.
deps=$(scripts/test-deps.sh start)
eval "$deps"
trap 'scripts/test-deps.sh stop "$AGENTRY_TEST_DEPS"' EXIT
# A test that needs a server fails, instead of skipping, when it is missing.
export AGENTRY_REQUIRE_SERVICES=1

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" $unformatted >&2
  exit 1
fi

go vet ./...

# Every test, with the race detector, and the coverage of the whole
# module: each package's statements that some test ran, the binary's
# runs (built with -cover by the tests that run it) included. Every
# package holds the floor (internal/coverfloor names the few it exempts).
cover=$(mktemp -d "${TMPDIR:-/tmp}/agentry-cover.XXXXXX")
trap 'rm -rf "$cover"; scripts/test-deps.sh stop "$AGENTRY_TEST_DEPS"' EXIT
mkdir "$cover/bin"
AGENTRY_COVERDIR="$cover/bin" go test -race -count=1 -coverpkg=./... -coverprofile="$cover/tests.out" ./...
go tool covdata textfmt -i="$cover/bin" -o "$cover/bin.out"
go run ./internal/coverfloor -min 80 "$cover/tests.out" "$cover/bin.out" >"$cover/floor.txt" || {
  cat "$cover/floor.txt" >&2
  exit 1
}
tail -n 1 "$cover/floor.txt"

# A short run of every fuzz target, from its seed corpus in testdata/fuzz.
# The budget is a count of inputs, not a duration: a duration races the
# fuzz coordinator's own deadline in Go 1.26 and fails at random with
# "context deadline exceeded" (go.dev/issue/75804). Minimizing a new
# input is capped too: an input the full JSON Schema validator is slow on
# (a number with a six-digit exponent) would otherwise stall the run.
fuzz() {
  local out
  if ! out=$(go test -run '^$' -fuzz "^$2\$" -fuzztime "${3:-${FUZZTIME:-50000x}}" -fuzzminimizetime 100x "$1" 2>&1); then
    echo "$out" >&2
    echo "fuzz: $2 in $1 failed; the failing input is in $1/testdata/fuzz/$2" >&2
    exit 1
  fi
}
fuzz ./react FuzzParse
fuzz ./schema FuzzExtractJSON
fuzz ./tool FuzzCall
fuzz ./tool FuzzFlatDecoder
fuzz ./tool FuzzFastPath
fuzz ./spec FuzzParse
fuzz ./llm/scripted FuzzParse
fuzz ./policy FuzzParse
fuzz ./policy FuzzRedact
fuzz ./prompt FuzzTemplate
# The server's protocol decoders: each input is a whole HTTP request and
# the store it may write to, so a thousand of each.
for target in FuzzA2A FuzzAGUI FuzzMCP FuzzChatCompletions; do
  fuzz ./server "$target" "${FUZZTIME_SERVER:-1000x}"
done
echo "fuzz: ok"
