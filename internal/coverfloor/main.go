// Command coverfloor checks a coverage profile of the whole module
// (go test -coverpkg=./... -coverprofile=FILE ./...) against a floor per
// package: the share of each package's statements that some test ran,
// whichever package's test it was (the SQL store is tested through its
// SQLite and Postgres backends). It prints each package's coverage and
// exits 1 when one is under the floor.
//
//	go run ./internal/coverfloor -min 80 cover.out
package main

import (
	"bufio"
	"flag"
	"fmt"
	"maps"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
)

// exempt are the packages the floor does not hold, and why.
var exempt = map[string]string{
	"examples":                "runnable examples: each a main checked by its own test, not a library",
	"internal/testdb":         "test infrastructure: starting the services the tests need",
	"internal/browsertest":    "test infrastructure: driving Chromium for the viewer's tests",
	"internal/wiretest":       "test infrastructure: a fake vendor server",
	"internal/livetest":       "test infrastructure: live tests' key checks, which CI never runs",
	"internal/coverfloor":     "this command",
	"internal/mcpconformance": "a peer for the MCP conformance suite, run by it",
	"store/storetest":         "a conformance suite, run by each backend's tests",
	"memory/memorytest":       "a conformance suite, run by each backend's tests",
	"prompt/prompttest":       "a conformance suite, run by each store's tests",
	"agent/drive":             "the driver protocol's types: no statements to run",
}

func main() {
	min := flag.Float64("min", 80, "the floor, in percent of each package's statements")
	module := flag.String("module", "github.com/agentry/agentry", "the module path, left out of package names")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: coverfloor [-min PERCENT] PROFILE...")
		os.Exit(2)
	}
	blocks := map[string]*block{}
	for _, name := range flag.Args() {
		if err := read(name, blocks); err != nil {
			fmt.Fprintln(os.Stderr, "coverfloor:", err)
			os.Exit(2)
		}
	}
	pkgs := byPackage(blocks, *module)
	if len(pkgs) == 0 {
		fmt.Fprintln(os.Stderr, "coverfloor: the profile covers no package")
		os.Exit(2)
	}
	under := 0
	for _, p := range slices.Sorted(maps.Keys(pkgs)) {
		c := pkgs[p]
		pct := 100 * float64(c.ran) / float64(max(c.total, 1))
		mark := " "
		if why := exempted(p); why != "" {
			mark = "-"
		} else if pct < *min {
			mark, under = "✗", under+1
		}
		fmt.Printf("%s %5.1f%%  %s\n", mark, pct, p)
	}
	if under > 0 {
		fmt.Fprintf(os.Stderr, "coverfloor: %d packages under %.0f%% (✗); a package the floor does not hold is marked -\n", under, *min)
		os.Exit(1)
	}
	fmt.Printf("coverfloor: every package at %.0f%% or more\n", *min)
}

// exempted says why p is exempt, "" when it is not.
func exempted(p string) string {
	for prefix, why := range exempt {
		if p == prefix || strings.HasPrefix(p, prefix+"/") {
			return why
		}
	}
	return ""
}

type counts struct{ total, ran int }

// block is a profile's block: its statements, and whether any run ran it.
type block struct {
	stmts int
	ran   bool
}

// read adds a profile's blocks to blocks: a block several profiles (or
// test binaries) report counts once, as ran when any ran it.
func read(name string, blocks map[string]*block) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "mode:") || line == "" {
			continue
		}
		// file.go:1.2,3.4 STMTS COUNT
		fields := strings.Fields(line)
		if len(fields) != 3 {
			return fmt.Errorf("%s:%d: %q is not a profile line", name, n, line)
		}
		stmts, err1 := strconv.Atoi(fields[1])
		count, err2 := strconv.Atoi(fields[2])
		if err1 != nil || err2 != nil {
			return fmt.Errorf("%s:%d: %q is not a profile line", name, n, line)
		}
		b := blocks[fields[0]]
		if b == nil {
			b = &block{stmts: stmts}
			blocks[fields[0]] = b
		}
		b.ran = b.ran || count > 0
	}
	return sc.Err()
}

// byPackage sums the blocks by package, named without the module path.
func byPackage(blocks map[string]*block, module string) map[string]*counts {
	pkgs := map[string]*counts{}
	for pos, b := range blocks {
		file, _, _ := strings.Cut(pos, ":")
		p := strings.TrimPrefix(strings.TrimPrefix(path.Dir(file), module), "/")
		if p == "" {
			p = "."
		}
		c := pkgs[p]
		if c == nil {
			c = &counts{}
			pkgs[p] = c
		}
		c.total += b.stmts
		if b.ran {
			c.ran += b.stmts
		}
	}
	return pkgs
}
