package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/internal/testdb"
	"github.com/agentry/agentry/tool"
)

// TestPrivateTools: a private tool's input and output reach the tool and
// the model, and nothing else: not the events, the logs, the Result's
// trace and transcript, nor the stored log, where digests stand in; a
// replay still runs (and would see a divergence by the digests); a
// resume is refused, saying why.
func TestPrivateTools(t *testing.T) {
	const input, output = "PATIENT-ID-4711", "DIAGNOSIS-CONFIDENTIAL-42"
	var received string
	lookup := tool.Must(tool.Func("lookup", "Look a patient up.", func(_ context.Context, in echoArgs) (string, error) {
		received = in.Text
		return output, nil
	}, tool.WithIdempotency(tool.Safe)))
	sp := `{"agent_name": "clinic", "version": "v1", "model_name": "m", "tools": ["lookup", "add"],
		"policy": {"private_tools": ["look*"]}}`
	m := &recorder{replies: []reply{calls(call("1", "lookup", `{"text": "`+input+`"}`), call("2", "add", `{"a": 1, "b": 2}`)), answer("noted")}}
	ctx := context.Background()
	st := openStore(t, testdb.SQLite(t))
	var logs bytes.Buffer
	a, err := New(mustSpec(t, sp), WithProvider(m, "test"), WithTools(testTools(t, lookup)),
		WithLogger(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	if err != nil {
		t.Fatal(err)
	}
	var events bytes.Buffer
	res, err := a.Run(ctx, nil, WithStore(st), WithEvents(func(e event.Event) {
		b, _ := json.Marshal(e)
		events.Write(b)
	}, event.Block()))
	if err != nil {
		t.Fatal(err)
	}
	if received != input {
		t.Fatalf("the tool got %q", received)
	}
	sawOutput := false
	for _, msg := range m.reqs[1].Messages {
		sawOutput = sawOutput || strings.Contains(msg.Content, output)
	}
	if !sawOutput {
		t.Error("the model was not shown the private output")
	}
	result, _ := json.Marshal(res)
	recs, _ := st.Records(ctx, res.ID, 0)
	var stored bytes.Buffer
	for _, r := range recs {
		stored.Write(r.Data)
	}
	for where, text := range map[string]string{"the Result": string(result), "the events": events.String(), "the logs": logs.String(), "the stored log": stored.String()} {
		if strings.Contains(text, input) || strings.Contains(text, output) {
			t.Errorf("%s holds the private input or output", where)
		}
		if !strings.Contains(text, "private:sha256:") {
			t.Errorf("%s has no digest of them", where)
		}
	}
	// The other tool is not private.
	if res.Steps[1].Observation != "3" || !strings.Contains(string(res.Steps[1].Action.Input), `"a": 1`) {
		t.Errorf("a tool that is not private was hidden: %+v", res.Steps[1])
	}
	rep, err := a.Replay(ctx, st, res.ID)
	if err != nil || !rep.Identical() {
		t.Errorf("replay: %v %+v", err, rep)
	}
	// A run paused for approval cannot go on: its log lacks what the
	// model would be shown again.
	m2 := &recorder{replies: []reply{calls(call("1", "lookup", `{"text": "`+input+`"}`)), calls(call("2", "add", `{"a": 1, "b": 2}`)), answer("noted")}}
	b, err := New(mustSpec(t, `{"agent_name": "clinic", "version": "v1", "model_name": "m", "tools": ["lookup", "add"],
		"policy": {"private_tools": ["look*"], "approval": {"tools": ["add"]}}}`), WithProvider(m2, "test"), WithTools(testTools(t, lookup)))
	if err != nil {
		t.Fatal(err)
	}
	paused, err := b.Run(ctx, nil, WithStore(st))
	if !errors.Is(err, ErrAwaitingApproval) {
		t.Fatalf("want a pause: %v", err)
	}
	if _, err := b.Resume(ctx, st, paused.ID); !errors.Is(err, ErrNotResumable) || !strings.Contains(err.Error(), "private") {
		t.Errorf("resume: %v", err)
	}
	if _, err := New(mustSpec(t, `{"agent_name": "r", "version": "v1", "model_name": "m", "mode": "react", "tools": ["lookup"],
		"policy": {"private_tools": ["lookup"]}}`), WithProvider(m, "test"), WithTools(testTools(t, lookup))); err == nil || !strings.Contains(err.Error(), "private_tools") {
		t.Errorf("a ReAct agent with private tools: %v", err)
	}
}
