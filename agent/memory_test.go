package agent

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentry/agentry/internal/testdb"
	"github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/memory"
	"github.com/agentry/agentry/memory/inmem"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool"
)

const memorySpec = "testdata/memory/agent.json"

// memoryAgent is the concierge playing the script, over b, its spec
// edited by edit (when not nil); it is closed when the test ends.
func memoryAgent(t *testing.T, b memory.Backend, script string, edit func(*spec.Spec), opts ...Option) *Agent {
	t.Helper()
	sp, err := spec.Load(memorySpec)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(sp)
	}
	s, err := scripted.Load("testdata/memory/" + script)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(sp, append([]Option{WithProvider(s.Model(), "scripted"), WithMemory(b), WithBaseDir("testdata/memory")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// memoryRun runs the concierge for user with the script, over b.
func memoryRun(t *testing.T, b memory.Backend, user, script string, edit func(*spec.Spec)) *Result {
	t.Helper()
	a := memoryAgent(t, b, script, edit)
	res, err := a.Run(context.Background(), map[string]any{"task": "help"}, WithUser(user))
	if err != nil {
		t.Fatalf("run for %s: %v", user, err)
	}
	return res
}

// Two runs for one user: the second finds what the first remembered, in
// its system prompt and through memory_search; a run for another user
// sees none of it.
func TestMemoryAcrossRuns(t *testing.T) {
	b := inmem.New()
	first := memoryRun(t, b, "ada", "remember.json", nil)
	if len(first.MemoryDeltas) != 2 || first.MemoryDeltas[0].Kind != "preference" || first.MemoryDeltas[1].Kind != "final_answer" ||
		first.MemoryDeltas[1].Text != "Noted: window seats." || first.MemoryDeltas[0].Stream != "user:ada" {
		t.Errorf("the first run's memory_deltas: %+v", first.MemoryDeltas)
	}
	if strings.Contains(first.Messages[0].Content, "What you remember") {
		t.Errorf("the first run had something to remember: %s", first.Messages[0].Content)
	}
	entries, _ := b.Memory().Read(context.Background(), "user:ada", memory.ReadOptions{})
	if len(entries) != 2 || entries[0].RunID != first.ID || entries[0].Agent != "concierge" || entries[0].UserID != "ada" {
		t.Errorf("what the first run wrote: %+v", entries)
	}

	second := memoryRun(t, b, "ada", "recall.json", nil)
	if sys := second.Messages[0].Content; !strings.Contains(sys, "What you remember (user:ada, oldest first):") ||
		!strings.Contains(sys, "[preference] Prefers window seats") || !strings.Contains(sys, "[final_answer] Noted: window seats.") {
		t.Errorf("the second run's system prompt:\n%s", sys)
	}
	if obs := second.Steps[0].Observation; !strings.Contains(obs, "Prefers window seats") {
		t.Errorf("memory_search for ada: %s", obs)
	}

	other := memoryRun(t, b, "bob", "recall.json", nil)
	if sys := other.Messages[0].Content; strings.Contains(sys, "remember") && strings.Contains(sys, "window") {
		t.Errorf("bob's prompt holds ada's memory:\n%s", sys)
	}
	if obs := other.Steps[0].Observation; strings.Contains(obs, "window") {
		t.Errorf("memory_search for bob found ada's entry: %s", obs)
	}
}

// Writes pass the policy's memory_write filters (block or redact, each
// audited as a policy_decision) and the default secret redaction.
func TestMemoryWriteFilters(t *testing.T) {
	for _, tc := range []struct {
		name, filters string
		want          []string // the stream's texts after the run
		observe       string   // in memory_append's observation
	}{
		{"none", ``, []string{"Prefers window seats on long flights", "Noted: window seats."}, `"id"`},
		{"redact", `{"name": "seats", "pattern": "window", "on": ["memory_write"], "action": "redact"}`,
			[]string{"Prefers [REDACTED:seats] seats on long flights", "Noted: [REDACTED:seats] seats."}, `"id"`},
		{"block", `{"name": "seats", "pattern": "window", "on": ["memory_write"], "action": "block"}`,
			nil, "policy_violation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := inmem.New()
			res := memoryRun(t, b, "ada", "remember.json", func(sp *spec.Spec) {
				if tc.filters != "" {
					sp.Policy, _ = policy.Parse([]byte(`{"content_filters": [` + tc.filters + `]}`))
				}
			})
			entries, _ := b.Memory().Read(context.Background(), "user:ada", memory.ReadOptions{})
			var got []string
			for _, e := range entries {
				got = append(got, e.Text)
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("stored %q, want %q", got, tc.want)
			}
			if obs := res.Steps[0].Observation; !strings.Contains(obs, tc.observe) {
				t.Errorf("memory_append's observation %s, want %q", obs, tc.observe)
			}
			if !res.Success {
				t.Errorf("a filtered write failed the run: %+v", res.Error)
			}
		})
	}
}

// A secret written to memory is stored redacted, by default: here the
// input, which memory.write names, holds one.
func TestMemoryRedactsSecrets(t *testing.T) {
	t.Setenv("CONCIERGE_API_KEY", "canary-memory-secret-4711")
	b := inmem.New()
	sp, _ := spec.Load(memorySpec)
	sp.Memory.Write = []string{"input", "final_answer"}
	s, _ := scripted.Load("testdata/memory/remember.json")
	a, err := New(sp, WithProvider(s.Model(), "scripted"), WithMemory(b), WithBaseDir("testdata/memory"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Run(context.Background(), map[string]any{"task": "my key is canary-memory-secret-4711"}, WithUser("ada")); err != nil {
		t.Fatal(err)
	}
	entries, _ := b.Memory().Read(context.Background(), "user:ada", memory.ReadOptions{})
	var input string
	for _, e := range entries {
		if e.Kind == "input" {
			input = e.Text
		}
		if strings.Contains(e.Text, "canary-memory-secret-4711") {
			t.Errorf("stored in the clear: %q", e.Text)
		}
	}
	if !strings.Contains(input, "[REDACTED:secret]") {
		t.Errorf("the input entry: %q", input)
	}
}

// A memory tool without the memory field, or memory without a backend,
// is refused when the agent is built.
func TestMemoryBuildErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*spec.Spec)
		opts []Option
		want string
	}{
		{"db tool without memory", func(sp *spec.Spec) { sp.Memory = nil; sp.Tools = []string{"db_read"} }, nil,
			`tools[0] "db_read": a memory tool needs the spec's memory field`},
		{"no backend", func(*spec.Spec) {}, nil, "memory.backend: none given"},
		{"backend not registered", func(sp *spec.Spec) { sp.Memory.Backend = "redis://127.0.0.1:1/0" }, nil, "memory.backend: memory: no redis backend is registered (import github.com/agentry/agentry/memory/redis"},
		{"backend down", func(sp *spec.Spec) { sp.Memory.Backend = "postgres://agentry@127.0.0.1:1/x?connect_timeout=2" }, nil, "memory.backend: store (postgres)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp, _ := spec.Load(memorySpec)
			tc.edit(sp)
			s, _ := scripted.Load("testdata/memory/remember.json")
			_, err := New(sp, append([]Option{WithProvider(s.Model(), "scripted"), WithBaseDir("testdata/memory")}, tc.opts...)...)
			var se *spec.Error
			if !errors.As(err, &se) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v, want %q", err, tc.want)
			}
		})
	}
	// The library reads no environment: a key is given, and checked.
	t.Setenv(memory.KeyEnv, "not a key")
	sp, _ := spec.Load(memorySpec)
	s, _ := scripted.Load("testdata/memory/remember.json")
	if _, err := New(sp, WithProvider(s.Model(), "scripted"), WithMemory(inmem.New())); err != nil {
		t.Errorf("the environment's key reached the library: %v", err)
	}
	if _, err := New(sp, WithProvider(s.Model(), "scripted"), WithMemory(inmem.New()), WithEncryptionKey([]byte("short"))); err == nil ||
		!strings.Contains(err.Error(), "WithEncryptionKey") {
		t.Errorf("a bad key: %v", err)
	}
}

// The database tools, confined to the collections memory.collections
// names for the run's input: writes are redacted and listed in
// memory_deltas, a collection outside the list is a policy_violation, a
// missing key is not_found.
func TestDBTools(t *testing.T) {
	b := inmem.New()
	res := memoryRun(t, b, "ada", "db.json", func(sp *spec.Spec) {
		sp.Tools = []string{"db_write", "db_read", "db_query", "db_search"}
		sp.Memory.Tools, sp.Memory.Write = false, nil
		sp.Memory.Collections = []string{"trips:${user_id}"}
	})
	obs := func(i int) string { return res.Steps[i].Observation }
	if !strings.Contains(obs(0), `"key":"lisbon"`) || !strings.Contains(obs(1), "policy_violation") || !strings.Contains(obs(1), "trips:bob") {
		t.Errorf("writes: %s | %s", obs(0), obs(1))
	}
	if !strings.Contains(obs(2), `"city":"Lisbon"`) || !strings.Contains(obs(3), `"score"`) || !strings.Contains(obs(4), "not_found") {
		t.Errorf("reads: %s | %s | %s", obs(2), obs(3), obs(4))
	}
	d, err := b.DB().Read(context.Background(), "trips:ada", "lisbon")
	if err != nil || d.Value["card"] != "token [REDACTED:secret]" || d.UserID != "ada" || d.RunID != res.ID {
		t.Errorf("stored: %+v, %v", d, err)
	}
	if _, err := b.DB().Read(context.Background(), "trips:bob", "paris"); err == nil {
		t.Error("a write outside memory.collections was stored")
	}
	if len(res.MemoryDeltas) != 1 || res.MemoryDeltas[0].Collection != "trips:ada" || res.MemoryDeltas[0].Key != "lisbon" {
		t.Errorf("memory_deltas: %+v", res.MemoryDeltas)
	}
}

// A replay of a stored run rebuilds the prompt it began with from its
// log, even when the stream has changed since, and writes nothing.
func TestMemoryReplay(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, testdb.SQLite(t))
	b := inmem.New()
	memoryRun(t, b, "ada", "remember.json", nil)
	a := memoryAgent(t, b, "recall.json", nil)
	res, err := a.Run(ctx, map[string]any{"task": "help", "user_id": "ada"}, WithStore(st), WithUser("ada"))
	if err != nil || !strings.Contains(res.Messages[0].Content, "window seats") {
		t.Fatalf("the recorded run: %v\n%s", err, res.Messages[0].Content)
	}
	if _, err := b.Memory().Append(ctx, memory.Entry{Stream: "user:ada", Text: "Now prefers the aisle"}, memory.Retention{}); err != nil {
		t.Fatal(err)
	}
	before, _ := b.Memory().Read(ctx, "user:ada", memory.ReadOptions{})
	rep, err := a.Replay(ctx, st, res.ID)
	if err != nil || !rep.Identical() {
		t.Errorf("replay after the stream changed: %v %+v", err, rep)
	}
	if after, _ := b.Memory().Read(ctx, "user:ada", memory.ReadOptions{}); len(after) != len(before) {
		t.Errorf("the replay wrote %d entries", len(after)-len(before))
	}
}

// memory_read gives the newest entries first, or the oldest with
// "oldest", each with its time and kind.
func TestMemoryRead(t *testing.T) {
	b := inmem.New()
	memoryRun(t, b, "ada", "remember.json", nil)
	res := memoryRun(t, b, "ada", "read.json", func(sp *spec.Spec) { sp.Memory.Write = nil })
	newest, all := res.Steps[0].Observation, res.Steps[1].Observation
	if !strings.Contains(newest, `"kind":"final_answer"`) || strings.Contains(newest, "preference") {
		t.Errorf("memory_read limit 1: %s", newest)
	}
	if i, j := strings.Index(all, "preference"), strings.Index(all, "final_answer"); i < 0 || j < 0 || i > j || !strings.Contains(all, `"time":"`) {
		t.Errorf("memory_read oldest first: %s", all)
	}
}

// A memory_write filter redacts a document's value as JSON: a card
// number written as a JSON number becomes a string, and the document
// stays a document.
func TestDBWriteRedactsAsJSON(t *testing.T) {
	b := inmem.New()
	res := memoryRun(t, b, "ada", "db_card.json", func(sp *spec.Spec) {
		sp.Tools = []string{"db_write"}
		sp.Memory.Tools, sp.Memory.Write, sp.Memory.Collections = false, nil, []string{"cards"}
		sp.Policy, _ = policy.Parse([]byte(`{"content_filters": [{"name": "pii", "match": "pii", "on": ["memory_write"], "action": "redact"}]}`))
	})
	if obs := res.Steps[0].Observation; !strings.Contains(obs, `"key":"ada"`) {
		t.Fatalf("db_write: %s", obs)
	}
	d, err := b.DB().Read(context.Background(), "cards", "ada")
	if err != nil || d.Value["number"] != "[REDACTED:pii]" || d.Value["holder"] != "[REDACTED:pii]" {
		t.Errorf("stored %+v, %v", d.Value, err)
	}
}

// Memory is named by the run's user alone: an input that claims another
// user's id is refused, as is one that claims any id for a run without a
// user, and the database tools reach no collection the spec does not
// name.
func TestMemoryIsolation(t *testing.T) {
	b := inmem.New()
	memoryRun(t, b, "ada", "remember.json", nil)
	a := memoryAgent(t, b, "recall.json", nil)
	for _, tc := range []struct {
		name  string
		input map[string]any
		opts  []RunOption
		want  string
	}{
		{"another user's id in the input", map[string]any{"task": "t", "user_id": "ada"}, []RunOption{WithUser("mallory")}, `is not the run's user "mallory"`},
		{"an id in the input, no user", map[string]any{"task": "t", "user_id": "ada"}, nil, "the run has no user"},
		{"no user at all", map[string]any{"task": "t"}, nil, "the run has none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := a.Run(context.Background(), tc.input, tc.opts...)
			if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), tc.want) || res.Error.Code != CodeValidation {
				t.Fatalf("run: %v; want it refused (%s)", err, tc.want)
			}
			if strings.Contains(res.Messages[0].Content, "window") {
				t.Error("ada's memory reached the prompt")
			}
		})
	}
	res := memoryRun(t, b, "ada", "db.json", func(sp *spec.Spec) {
		sp.Tools = []string{"db_write", "db_read", "db_query", "db_search"}
		sp.Memory.Tools, sp.Memory.Write = false, nil
	})
	for i, st := range res.Steps {
		if !strings.Contains(st.Observation, "policy_violation") || !strings.Contains(st.Observation, "names none") {
			t.Errorf("step %d without memory.collections: %s", i, st.Observation)
		}
	}
}

// With a key, the recalled memory a run's start record keeps for its
// resume is sealed to that run: the store never holds it in the clear,
// and a replay opens it.
func TestMemorySealedStartRecord(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, testdb.SQLite(t))
	key := []byte("0123456789abcdef0123456789abcdef")
	b := inmem.New()
	if _, err := memoryAgent(t, b, "remember.json", nil, WithEncryptionKey(key)).Run(ctx, map[string]any{"task": "help"}, WithUser("ada")); err != nil {
		t.Fatal(err)
	}
	a := memoryAgent(t, b, "recall.json", nil, WithEncryptionKey(key))
	res, err := a.Run(ctx, map[string]any{"task": "help"}, WithStore(st), WithUser("ada"))
	if err != nil || !strings.Contains(res.Messages[0].Content, "window seats") {
		t.Fatalf("the recalling run: %v", err)
	}
	if _, err := runlog.Read(ctx, st, res.ID); !errors.Is(err, runlog.ErrSealed) {
		t.Errorf("the sealed log read without the key: %v", err)
	}
	sealer, _ := runlog.NewSealer(key)
	l, err := runlog.Read(ctx, st, res.ID, runlog.Sealed(sealer))
	if err != nil {
		t.Fatal(err)
	}
	if kept := l.Start.Memory; !strings.HasPrefix(kept, "agentry-sealed:v1:") || strings.Contains(kept, "window") {
		t.Errorf("the start record keeps %q; want it sealed", kept)
	}
	if rep, err := a.Replay(ctx, st, res.ID); err != nil || !rep.Identical() {
		t.Errorf("replay: %v %+v", err, rep.Differences)
	}
	other := memoryAgent(t, b, "recall.json", nil, WithEncryptionKey([]byte("fedcba9876543210fedcba9876543210")))
	if _, err := other.Replay(ctx, st, res.ID); !errors.Is(err, runlog.ErrSealed) || !strings.Contains(err.Error(), "does not open with this key") {
		t.Errorf("a replay with another key: %v; want the log refused", err)
	}
}

// A tool's result written to memory is redacted before it is cut to
// size: a secret straddling the cut is not stored half in the clear.
func TestMemoryRedactsBeforeCutting(t *testing.T) {
	const secret = "sk-proj-CANARYmemcut00000000000000009"
	// The cut (at 4 KiB of the output) leaves "sk-proj-CANA": too short
	// for a key's shape on its own.
	pad := strings.Repeat("x", 4<<10-13)
	leak := tool.Must(tool.Func("leak", "Leak.", func(context.Context, echoArgs) (string, error) {
		return pad + " " + secret + " and more", nil
	}, tool.WithIdempotency(tool.Safe)))
	b := inmem.New()
	m := &recorder{replies: []reply{calls(call("1", "leak", `{"text": "x"}`)), answer("done")}}
	a, err := New(mustSpec(t, `{"agent_name": "m", "version": "v1", "model_name": "m", "tools": ["leak"],
		"memory": {"stream": "user:${user_id}", "write": ["tool_results"]}}`), WithProvider(m, "test"), WithTools(testTools(t, leak)), WithMemory(b))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(context.Background(), nil, WithUser("ada")); err != nil {
		t.Fatal(err)
	}
	entries, _ := b.Memory().Read(context.Background(), "user:ada", memory.ReadOptions{})
	if len(entries) == 0 {
		t.Fatal("nothing was remembered")
	}
	for _, e := range entries {
		if strings.Contains(e.Text, "sk-proj-C") {
			t.Errorf("stored in part in the clear: …%q", e.Text[max(0, len(e.Text)-80):])
		}
	}
}
