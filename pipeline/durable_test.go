package pipeline

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentry/agentry/store"
	_ "github.com/agentry/agentry/store/sqlite"
)

// A stored pipeline paused for the user is found in the store with its
// envelope, and goes on as the same run.
func TestStoredPauseAndResume(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d, _ := Parse("test", []byte(abcDef()))
	hooks := []Option{WithHooks("a", Hooks{Work: func(context.Context, *Envelope) (map[string]any, error) {
		return map[string]any{"route": map[string]any{"to": "b"}}, nil
	}}), WithHooks("b", Hooks{Work: func(_ context.Context, env *Envelope) (map[string]any, error) {
		if ans, ok := env.Metadata["user_response"]; ok {
			return map[string]any{"env": ans}, nil
		}
		return map[string]any{"outcome": "clarify", "question": "Which environment?"}, nil
	}}), WithHooks("c", Hooks{Work: func(context.Context, *Envelope) (map[string]any, error) { return map[string]any{}, nil }})}
	p, err := New(d, ".", hooks...)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Run(ctx, map[string]any{"task": "deploy"}, WithStore(st))
	if err != nil || res.Envelope.Pending == nil {
		t.Fatalf("run: %v", err)
	}
	run, err := st.Get(ctx, res.ID)
	if err != nil || run.Kind != "pipeline" || run.Status != store.AwaitingApproval || run.Holder != "" {
		t.Fatalf("stored run = %+v, %v; want a pipeline awaiting approval, released", run, err)
	}
	p2, env, err := Stored(ctx, st, res.ID, hooks...)
	if err != nil || env == nil || env.Pending == nil || env.Pending.Question != "Which environment?" {
		t.Fatalf("Stored = %v, %+v", err, env)
	}
	if env.RawInput["task"] != "deploy" {
		t.Errorf("stored envelope input = %v", env.RawInput)
	}
	res2, err := p2.Resume(ctx, env, "staging", WithStore(st), WithRunID(res.ID))
	if err != nil || !res2.Success || res2.ID != res.ID || stages(res2) != "a:success b:clarify b:success c:success" {
		t.Fatalf("resume: %v, %s", err, stages(res2))
	}
	if run, _ := st.Get(ctx, res.ID); run.Status != store.Completed || run.Turns != 4 {
		t.Errorf("after the resume: %+v; want completed after 4 hops", run)
	}
	recs, err := st.Records(ctx, res.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[store.Kind]int{}
	for _, r := range recs {
		kinds[r.Kind]++
	}
	if kinds[store.KindStart] != 1 || kinds[store.KindResume] != 1 || kinds[store.KindResult] != 2 || kinds[store.KindEvent] == 0 {
		t.Errorf("the log holds %v; want a start, a resume, two results and events", kinds)
	}
	if _, _, err := Stored(ctx, st, "run_missing"); err == nil {
		t.Error("Stored of a missing run: no error")
	}
}

// A confirm is decided like a call: a Confirmation as the answer reaches the
// stage and, in a stored run, the audit log.
func TestConfirmDecisionAudited(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d, _ := Parse("test", []byte(abcDef()))
	var got any
	p, err := New(d, ".", WithHooks("a", Hooks{Work: func(context.Context, *Envelope) (map[string]any, error) {
		return map[string]any{"route": map[string]any{"to": "b"}}, nil
	}}), WithHooks("b", Hooks{Work: func(_ context.Context, env *Envelope) (map[string]any, error) {
		if ans, ok := env.Metadata["user_response"]; ok {
			got = ans
			return map[string]any{"confirmed": ans.(Confirmation).Approved}, nil
		}
		return map[string]any{"outcome": "confirm", "question": "Deploy?"}, nil
	}}), WithHooks("c", Hooks{Work: func(context.Context, *Envelope) (map[string]any, error) { return map[string]any{}, nil }}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Run(ctx, nil, WithStore(st))
	if err != nil || res.Envelope.Pending == nil || res.Envelope.Pending.Outcome != "confirm" {
		t.Fatalf("run: %v", err)
	}
	_, env, err := Stored(ctx, st, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	res2, err := p.Resume(ctx, env, Confirmation{Approved: false, Reason: "not on a Friday"}, WithStore(st), WithRunID(res.ID))
	if err != nil || !res2.Success {
		t.Fatalf("resume: %v", err)
	}
	if dec, ok := got.(Confirmation); !ok || dec.Approved || dec.Reason != "not on a Friday" {
		t.Errorf("the stage got %#v", got)
	}
	recs, _ := st.AuditLog(ctx, res.ID)
	if len(recs) != 1 || recs[0].Rule != "pipeline.confirm" || recs[0].Decision != "deny" || recs[0].Target != "stage:b" ||
		recs[0].Reason != "not on a Friday" {
		t.Errorf("audit: %+v", recs)
	}
}

// WithRunID continues only a pipeline's run that waits for the user or
// was interrupted: a finished run, an agent's run or an unknown id are
// refused, and nothing is written to them.
func TestWithRunIDContinuesOnlyAResumablePipeline(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d, _ := Parse("test", []byte(abcDef()))
	service := func(context.Context, *Envelope) (map[string]any, error) { return map[string]any{}, nil }
	first := func(context.Context, *Envelope) (map[string]any, error) {
		return map[string]any{"route": map[string]any{"to": "b"}}, nil
	}
	p, err := New(d, ".", WithHooks("a", Hooks{Work: first}), WithHooks("b", Hooks{Work: service}), WithHooks("c", Hooks{Work: service}))
	if err != nil {
		t.Fatal(err)
	}
	done, err := p.Run(ctx, map[string]any{"task": "deploy"}, WithStore(st))
	if err != nil || !done.Success {
		t.Fatal(err)
	}
	if err := st.Create(ctx, store.Run{ID: "run_agent", Kind: "agent", Name: "x", Status: store.AwaitingApproval}); err != nil {
		t.Fatal(err)
	}
	before, _ := st.Records(ctx, done.ID, 0)
	for _, tc := range []struct{ name, id, want string }{
		{"a completed pipeline", done.ID, "is completed"},
		{"an agent's run", "run_agent", "not a pipeline's"},
		{"an unknown run", "run_nowhere", "not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Run(ctx, map[string]any{"task": "again"}, WithStore(st), WithRunID(tc.id))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("continuing %s: %v; want it refused (%s)", tc.id, err, tc.want)
			}
		})
	}
	if after, _ := st.Records(ctx, done.ID, 0); len(after) != len(before) {
		t.Errorf("the completed run got %d more records", len(after)-len(before))
	}
	if _, err := p.Run(ctx, nil, WithRunID(done.ID)); err == nil {
		t.Error("WithRunID without a store was accepted")
	}
}
