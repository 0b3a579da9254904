package server

import (
	"fmt"
	"testing"

	"github.com/agentry/agentry/internal/browsertest"
)

// The viewer's tests run in a real Chromium (internal/browsertest).

// page is one browser tab on the viewer of a test server.
type page = browsertest.Page

// openPage starts a Chromium, its window width×height, on base.
func openPage(t *testing.T, base string, width, height int) *page {
	t.Helper()
	return browsertest.Open(t, base, width, height)
}

// eval answers the value of a JavaScript expression.
func eval[T any](p *page, expr string) T { return browsertest.Eval[T](p, expr) }

// rowSel selects the runs list's row of run id.
func rowSel(id string) string { return fmt.Sprintf(`tr[data-run-id=%q]`, id) }

// startRun starts a run of agent over the API and answers its id.
func startRun(t *testing.T, f *fixture, key, body string) string {
	t.Helper()
	code, res := f.do(t, "POST", "/v1/runs", key, body)
	if code != 201 {
		t.Fatalf("start: %d %v", code, res)
	}
	return res["run_id"].(string)
}
