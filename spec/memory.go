package spec

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Memory is the spec field "memory": the stream an agent
// remembers in, what it loads at kickoff and writes at the end, and
// whether it gets the memory tools.
type Memory struct {
	// Backend is a data source name (memory.Open): "mem:", a SQLite file
	// (relative to the spec's directory), a postgres:// or redis:// URL.
	// Empty: the host's (the binary's run store).
	Backend string `json:"backend,omitempty"`
	// Stream names the stream, with ${var} from the input
	// ("user:${user_id}"); ${user_id} is the run's user (--user,
	// WithUser), never the input's.
	Stream string `json:"stream,omitempty"`
	// LoadLast is how many of the stream's last entries go into the
	// system prompt at kickoff.
	LoadLast int `json:"load_last,omitempty"`
	// Write names what the run appends at its end: "final_answer",
	// "input", "tool_results".
	Write []string `json:"write,omitempty"`
	// Tools gives the agent memory_append, memory_read and memory_search.
	Tools bool `json:"tools,omitempty"`
	// MaxEntries and TTL ("720h", "30d") are the stream's retention.
	MaxEntries int    `json:"max_entries,omitempty"`
	TTL        string `json:"ttl,omitempty"`
	// Collections are the only collections the db_* tools reach (each
	// may use ${var}, and ${user_id} as Stream does); none given, they
	// reach none.
	Collections []string `json:"collections,omitempty"`
}

// memoryWrites are what Memory.Write may name.
var memoryWrites = []string{"final_answer", "input", "tool_results"}

// ParseTTL reads a retention time: a Go duration ("36h", "90m") or a
// number of days ("30d").
func ParseTTL(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("%q: want a positive number of days (30d) or a duration (36h)", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q: want a positive duration (36h) or a number of days (30d)", s)
	}
	return d, nil
}

func (m *Memory) check(c *checker) {
	if m.Stream == "" && (m.LoadLast > 0 || len(m.Write) > 0 || m.Tools) {
		c.bad("memory.stream is required to load, write or give memory tools (\"user:${user_id}\")")
	}
	if m.LoadLast < 0 || m.LoadLast > 1000 {
		c.bad("memory.load_last %d is outside 0..1000", m.LoadLast)
	}
	for i, w := range m.Write {
		if !slices.Contains(memoryWrites, w) {
			c.bad("memory.write[%d] %q: want one of %s", i, w, strings.Join(memoryWrites, ", "))
		}
	}
	if m.MaxEntries < 0 {
		c.bad("memory.max_entries %d is negative", m.MaxEntries)
	}
	if _, err := ParseTTL(m.TTL); err != nil {
		c.bad("memory.ttl %v", err)
	}
	for i, name := range m.Collections {
		if name == "" {
			c.bad("memory.collections[%d] is empty", i)
		}
	}
}
