package agent

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/internal/testdb"
	"github.com/agentry/agentry/memory/inmem"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/tool"
)

func TestReplay(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, testdb.SQLite(t))
	l := ledger{filepath.Join(t.TempDir(), "ledger")}
	a := payerAgent(t, durableTools(t, l, true, nil))
	res, err := a.Run(ctx, payerInput, WithStore(st))
	if err != nil {
		t.Fatal(err)
	}
	before, _ := st.Records(ctx, res.ID, 0)

	// A tool that now adds one too many, and one whose description changed.
	offByOne := tool.Must(tool.Func("add", "Add two integers.", func(_ context.Context, in addArgs) (int, error) {
		return in.A + in.B + 1, nil
	}, tool.WithIdempotency(tool.Safe)))
	redescribed := tool.Must(tool.Func("add", "Add two integers, carefully.", func(_ context.Context, in addArgs) (int, error) {
		return in.A + in.B, nil
	}, tool.WithIdempotency(tool.Safe)))
	pay := durableTools(t, l, true, nil)
	payTool, _ := pay.Get("pay")
	registry := func(add tool.Tool) *tool.Registry {
		r, err := tool.NewRegistry(add, payTool)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, tc := range []struct {
		name  string
		tools *tool.Registry
		opts  []RunOption
		want  []string // what the differences say, in order
	}{
		{"identical", durableTools(t, l, true, nil), nil, nil},
		{"identical with live tools", durableTools(t, l, true, nil), []RunOption{LiveTools()}, nil},
		{"recorded results hide a changed tool", registry(offByOne), nil, nil},
		{"live tools find it", registry(offByOne), []RunOption{LiveTools()},
			// The different result changes what the model is asked next.
			[]string{"turn 1, call 1 (add): the tool's result differs", "turn 2: model call 2 asks something else",
				"turn 2, call 2 (add): the tool's result differs", "turn 3: model call 3 asks something else"}},
		{"a changed tool definition", registry(redescribed), nil,
			[]string{"turn 1: model call 1 asks something else", "turn 2: model call 2 asks something else", "turn 3: model call 3 asks something else"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent := len(l.sends(t))
			rep, err := payerAgent(t, tc.tools).Replay(ctx, st, res.ID, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Differences) != len(tc.want) {
				t.Fatalf("differences %v, want %d: %v", rep.Differences, len(tc.want), tc.want)
			}
			for i, d := range rep.Differences {
				if !strings.HasPrefix(d.String(), tc.want[i]) {
					t.Errorf("difference %d = %q, want it to start %q", i, d, tc.want[i])
				}
			}
			if rep.Identical() != (len(tc.want) == 0) {
				t.Errorf("Identical = %v with %d differences", rep.Identical(), len(tc.want))
			}
			if comparable(t, rep.Result) != comparable(t, res) && len(tc.want) == 0 {
				t.Errorf("an identical replay's Result differs:\n%s\n%s", comparable(t, rep.Result), comparable(t, res))
			}
			if n := len(l.sends(t)); n != sent {
				t.Errorf("the replay sent the payment again (%d sends, was %d)", n, sent)
			}
		})
	}
	if after, _ := st.Records(ctx, res.ID, 0); len(after) != len(before) {
		t.Errorf("replays wrote to the log: %d records, was %d", len(after), len(before))
	}
}

// A replay that needs a model call the log lacks stops and says so.
func TestReplayOfAnInterruptedRun(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, testdb.SQLite(t))
	id := interruptedRun(t, st, "before_model#1")
	rep, err := payerAgent(t, durableTools(t, ledger{filepath.Join(t.TempDir(), "l")}, true, nil)).Replay(ctx, st, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Differences) != 1 || !strings.Contains(rep.Differences[0].What, "the replay makes model call 1; the recording has 0") {
		t.Errorf("differences = %v, want the missing model call 1", rep.Differences)
	}
	if rep.Result.Success {
		t.Error("a replay past its recording succeeded")
	}
}

func TestServiceResume(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			st := openStore(t, b.dsn(t))
			l := ledger{filepath.Join(t.TempDir(), "ledger")}
			id := killedRun(t, st, "tool_end:pay#1", true, l)
			svc := NewService(StoreRuns(st), BuildWith(WithTools(durableTools(t, l, true, nil))))
			var events atomic.Int64
			unsub := svc.Subscribe(func(event.Event) { events.Add(1) }, event.Block())
			defer unsub()
			runs, err := svc.Interrupted(ctx)
			if err != nil || len(runs) != 1 || runs[0].ID != id || runs[0].Status != store.Interrupted {
				t.Fatalf("Interrupted = %+v, %v; want %s", runs, err, id)
			}
			res, err := svc.Resume(ctx, id)
			if err != nil || !res.Success || res.ID != id {
				t.Fatalf("Resume = %v, %v", res, err)
			}
			svc.Events().Flush()
			if events.Load() == 0 {
				t.Error("the resumed run's events did not reach the service's subscribers")
			}
			if runs, _ := svc.Interrupted(ctx); len(runs) != 0 {
				t.Errorf("after the resume, interrupted runs: %v", runs)
			}
			// A session the service creates is stored.
			a := payerAgent(t, durableTools(t, l, true, nil))
			res, err = svc.RunOnce(ctx, a, payerInput)
			if err != nil {
				t.Fatal(err)
			}
			if run, err := st.Get(ctx, res.ID); err != nil || run.Status != store.Completed {
				t.Errorf("the service's run in the store: %+v, %v", run, err)
			}
			if _, err := NewService().Resume(ctx, id); err != ErrNoStore {
				t.Errorf("Resume without a store = %v, want ErrNoStore", err)
			}
		})
	}
}

// resume with another model: the new model takes over from its first
// turn; a pipeline's run is not an agent's to resume.
func TestResumeWithAnotherModel(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, testdb.SQLite(t))
	l := ledger{filepath.Join(t.TempDir(), "ledger")}
	id := killedRun(t, st, "before_model#3", true, l)
	other := filepath.Join(t.TempDir(), "other.json")
	if err := os.WriteFile(other, []byte(`{"turns": [{"content": "Done, said the other model."}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	a := storedAgent(t, st, id, WithTools(durableTools(t, l, true, nil)), WithModel("scripted:"+other))
	res, err := resumeRun(t, a, st, id)
	if err != nil || res.Result != "Done, said the other model." || res.Iterations != 3 {
		t.Fatalf("resumed with another model: %v, %v after %d turns", err, res.Result, res.Iterations)
	}
	if n := len(l.sends(t)); n != 1 {
		t.Errorf("the payment was sent %d times, want once", n)
	}

	if err := st.Create(ctx, store.Run{ID: "run_pipe", Kind: "pipeline", Name: "p", Status: store.AwaitingApproval}); err != nil {
		t.Fatal(err)
	}
	if err := st.Append(ctx, store.Write{RunID: "run_pipe", Records: []store.Record{{Kind: store.KindStart,
		Data: []byte(`{"kind": "pipeline", "run_id": "run_pipe"}`)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := Stored(ctx, st, "run_pipe"); !errors.Is(err, ErrNotResumable) || !strings.Contains(err.Error(), "pipeline") {
		t.Errorf("Stored of a pipeline run = %v, want ErrNotResumable naming the pipeline", err)
	}
}

// A resumed run does not log again the turns it replays.
func TestResumeLogsOnlyWhatItRuns(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, testdb.SQLite(t))
	l := ledger{filepath.Join(t.TempDir(), "ledger")}
	id := killedRun(t, st, "tool_end:pay#1", true, l)
	var mu sync.Mutex
	turns := map[int64]int{}
	logger := slog.New(slog.NewJSONHandler(writerFunc(func(p []byte) (int, error) {
		var rec struct {
			Msg  string `json:"msg"`
			Turn int64  `json:"turn"`
		}
		if json.Unmarshal(p, &rec) == nil && rec.Msg == "model call" {
			mu.Lock()
			turns[rec.Turn]++
			mu.Unlock()
		}
		return len(p), nil
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	a, err := Stored(ctx, st, id, WithTools(durableTools(t, l, true, nil)), WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	sess, err := a.Resume(ctx, st, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if turns[1] != 0 || turns[2] != 1 || turns[3] != 1 {
		t.Errorf("model calls logged by turn: %v; want none of turn 1 (replayed) and one each of turns 2 and 3", turns)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// A replay that ends before its log opens (the agent given now has a
// memory stream the recorded input cannot name) reports it as a
// difference instead of failing.
func TestReplayEndedBeforeItsLogOpened(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, testdb.SQLite(t))
	b := inmem.New()
	res, err := memoryAgent(t, b, "recall.json", nil).Run(ctx, map[string]any{"task": "help", "user_id": "ada"}, WithStore(st), WithUser("ada"))
	if err != nil {
		t.Fatal(err)
	}
	a2 := memoryAgent(t, b, "recall.json", func(changed *spec.Spec) {
		changed.Memory.Stream = "team:${team}"
		changed.InputKeys = nil // team is optional: the recorded input lacks it
		changed.InputSchema = json.RawMessage(`{"type": "object", "required": ["task"],
			"properties": {"task": {"type": "string"}, "user_id": {"type": "string"}, "team": {"type": "string"}}}`)
	})
	rep, err := a2.Replay(ctx, st, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Identical() || !strings.Contains(rep.Differences[0].What, "before it began") || !strings.Contains(rep.Differences[0].What, "team") {
		t.Errorf("differences %+v; want the replay's early end, naming the missing variable", rep.Differences)
	}
}
