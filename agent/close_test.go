package agent

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool"
)

// closeCounts counts, per connector configuration ("id"), how often the
// test connector "counted" was closed.
var closeCounts = struct {
	sync.Mutex
	n map[string]int
}{n: map[string]int{}}

func init() {
	tool.RegisterConnector("counted", func(raw json.RawMessage, _ string) ([]tool.Tool, func() error, error) {
		var c struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, nil, err
		}
		t := tool.Must(tool.Func("counted_"+c.ID, "A tool of a connector that holds something open.",
			func(context.Context, struct{}) (string, error) { return "ok", nil }, tool.WithIdempotency(tool.Safe)))
		return []tool.Tool{t}, func() error {
			closeCounts.Lock()
			defer closeCounts.Unlock()
			closeCounts.n[c.ID]++
			if c.ID == "failing" {
				return errors.New("the pool did not close")
			}
			return nil
		}, nil
	})
}

func closes(id string) int {
	closeCounts.Lock()
	defer closeCounts.Unlock()
	return closeCounts.n[id]
}

// Close releases what an agent's connectors opened, its sub-agents' too,
// once however often it is called; an agent that fails to build releases
// what it had opened; a close that fails is reported.
func TestAgentClose(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const head = `"version": "v1", "model_name": "scripted:none.json", "system_text": "s"`
	write("none.json", `{"turns": [{"content": "done"}]}`)
	write("sub/none.json", `{"turns": [{"content": "done"}]}`)
	write("sub/v1.json", `{"agent_name": "sub", `+head+`, "tools": ["counted_sub"], "connectors": {"counted": {"id": "sub"}}}`)
	for _, tc := range []struct {
		name, spec string
		ids        []string // the connectors closed, once each
		buildErr   string
		closeErr   string
	}{
		{"own and sub-agent's", `{"agent_name": "top", ` + head + `, "tools": ["counted_top", "agent:sub"], "connectors": {"counted": {"id": "top"}}}`,
			[]string{"top", "sub"}, "", ""},
		{"failed build", `{"agent_name": "top", ` + head + `, "tools": ["counted_broken", "nope"], "connectors": {"counted": {"id": "broken"}}}`,
			[]string{"broken"}, `unknown tool "nope"`, ""},
		{"failing close", `{"agent_name": "top", ` + head + `, "tools": ["counted_failing"], "connectors": {"counted": {"id": "failing"}}}`,
			[]string{"failing"}, "", "the pool did not close"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp, err := spec.Parse(tc.name, []byte(tc.spec))
			if err != nil {
				t.Fatal(err)
			}
			before := map[string]int{}
			for _, id := range tc.ids {
				before[id] = closes(id)
			}
			a, err := New(sp, WithAgents(spec.Dir{Path: dir}), WithBaseDir(dir))
			if tc.buildErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.buildErr) {
					t.Fatalf("New = %v, want %q", err, tc.buildErr)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				for _, id := range tc.ids {
					if closes(id) != before[id] {
						t.Errorf("%s was closed before Close", id)
					}
				}
				for range 2 {
					if err := a.Close(); tc.closeErr == "" && err != nil || tc.closeErr != "" && (err == nil || !strings.Contains(err.Error(), tc.closeErr)) {
						t.Errorf("Close = %v, want %q", err, tc.closeErr)
					}
				}
			}
			for _, id := range tc.ids {
				if n := closes(id) - before[id]; n != 1 {
					t.Errorf("%s was closed %d times, want once", id, n)
				}
			}
		})
	}
}

// closingModel is a provider that holds something open.
type closingModel struct {
	recorder
	closed int
}

func (c *closingModel) Close() error { c.closed++; return nil }

// TestAgentClosesItsProvider: a provider that is an io.Closer is closed
// with the agent that uses it, once.
func TestAgentClosesItsProvider(t *testing.T) {
	m := &closingModel{}
	a, err := New(mustSpec(t, `{"agent_name": "c", "version": "v1", "model_name": "m"}`), WithProvider(m, "test"))
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	a.Close()
	if m.closed != 1 {
		t.Errorf("the provider was closed %d times", m.closed)
	}
}
