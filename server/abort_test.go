package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentry/agentry/store"
)

// A caller cannot abort a sub-run or a pipeline's stage out from under
// the run it is part of: its lease (its parent's process) is not broken,
// and the caller is told which run to abort.
func TestAbortOfAPartRefused(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	part := store.Run{ID: "run_part", Kind: "agent", Name: "greeter", Version: "v1", ParentID: "run_whole",
		Status: store.Running, Holder: "another-process", LeaseUntil: time.Now().Add(time.Minute)}
	if err := f.st.Create(ctx, part); err != nil {
		t.Fatal(err)
	}
	code, body := f.do(t, "POST", "/v1/runs/run_part/abort", "", "")
	if code != 409 || !strings.Contains(errMessage(body), "run_whole") {
		t.Errorf("abort of a part: %d %v; want 409 naming run_whole", code, body)
	}
	if run, err := f.st.Get(ctx, "run_part"); err != nil || run.Holder != "another-process" || run.Status != store.Running {
		t.Errorf("the part after the refused abort: %+v (%v); want it untouched", run, err)
	}
}

func errMessage(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	m, _ := e["message"].(string)
	return m
}
