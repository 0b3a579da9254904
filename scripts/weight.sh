#!/usr/bin/env bash
# weight.sh: what method reflection costs the agentry binary. It lists
# the functions that make the linker keep every exported method of every
# reachable type (-ldflags=-dumpdep, <ReflectMethod>), then builds the
# binary again with those calls cut out of copies of their packages and
# prints both sizes, stripped. The second binary is a measurement, not a
# program: its templates cannot call methods. Run from the project root.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pkg=${1:-./cmd/agentry}

echo "functions that keep every exported method alive ($pkg):"
go build -ldflags=-dumpdep -o /dev/null "$pkg" 2>"$work/dumpdep"
grep '<ReflectMethod>' "$work/dumpdep" | awk '{print "  " $1}' | sort -u

# patch MODULE FILE FROM TO...: a writable copy of MODULE with FROM
# replaced by TO in FILE, used in place of the module.
replaces=()
patch() {
	local mod=$1 file=$2
	shift 2
	local src dst
	src=$(go list -m -f '{{.Dir}}' "$mod")
	dst="$work/mods/${mod//\//_}"
	if [ ! -d "$dst" ]; then
		mkdir -p "$work/mods"
		cp -r "$src" "$dst"
		chmod -R u+w "$dst"
		replaces+=("replace $mod => $dst")
	fi
	while [ $# -gt 0 ]; do
		grep -qF -- "$1" "$dst/$file" || { echo "weight.sh: $mod/$file no longer has: $1" >&2; exit 1; }
		FROM=$1 TO=$2 perl -0pi -e 's/\Q$ENV{FROM}\E/$ENV{TO}/g' "$dst/$file"
		shift 2
	done
}
patch github.com/cbroglie/mustache mustache.go \
	'm := typ.Method(i)' 'm := reflect.Method{}; _ = typ' 'v.Method(i).Call(nil)[0]' 'reflect.Value{}'
patch github.com/mailgun/raymond/v2 eval.go \
	'ctx.MethodByName(strings.Title(name))' 'reflect.Value{}' 'ctx.MethodByName(name)' 'reflect.Value{}'
patch github.com/google/go-cmp cmp/internal/value/name.go 'm := t.Method(i)' 'm := reflect.Method{}'
patch go.temporal.io/sdk internal/internal_worker.go \
	'methodValue := structValue.Method(i)' 'methodValue := reflect.Value{}' \
	'method := structType.Method(i)' 'method := reflect.Method{}'
{ cat go.mod; printf '%s\n' "${replaces[@]}"; } >"$work/go.mod"
cp go.sum "$work/go.sum"
# text/template is the standard library's: an overlay replaces its file.
exec_go="$(go env GOROOT)/src/text/template/exec.go"
FROM='ptr.MethodByName(fieldName)' TO='(reflect.Value{})' perl -pe 's/\Q$ENV{FROM}\E/$ENV{TO}/' "$exec_go" >"$work/exec.go"
printf '{"Replace": {"%s": "%s"}}\n' "$exec_go" "$work/exec.go" >"$work/overlay.json"

go build -trimpath -ldflags='-s -w' -o "$work/now" "$pkg"
go build -modfile="$work/go.mod" -overlay="$work/overlay.json" -trimpath -ldflags='-s -w' -o "$work/without" "$pkg"
go build -modfile="$work/go.mod" -overlay="$work/overlay.json" -ldflags=-dumpdep -o /dev/null "$pkg" 2>"$work/dumpdep2"
left=$(grep -c '<ReflectMethod>' "$work/dumpdep2" || true)
printf 'stripped: %d MB now, %d MB without method reflection (%s functions left that keep methods)\n' \
	$(($(stat -c %s "$work/now") / 1000000)) $(($(stat -c %s "$work/without") / 1000000)) "$left"
