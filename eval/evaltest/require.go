// Package evaltest runs evaluations inside Go tests, as net/http/httptest
// serves inside them: Require fails a test whose agent passes too few
// cases of a dataset.
package evaltest

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentry/agentry/eval"
	"github.com/agentry/agentry/store"
	_ "github.com/agentry/agentry/store/sqlite" // Require's own store
)

// Require runs d on the targets inside a Go test and fails t when an
// agent's pass rate is under min, naming each failed case trial and why.
// Without Options.Store the runs go to a SQLite file in t's temporary
// directory. The report is returned for further checks.
func Require(t testing.TB, d *eval.Dataset, targets []eval.Target, o eval.Options, min float64) *eval.Report {
	t.Helper()
	ctx := t.Context()
	if o.Store == nil {
		st, err := store.Open(ctx, filepath.Join(t.TempDir(), "eval.db"))
		if err != nil {
			t.Fatalf("eval: a store for the runs: %v", err)
		}
		t.Cleanup(func() { st.Close() })
		o.Store = st
	}
	rep, err := eval.Run(ctx, d, targets, o)
	if err != nil {
		t.Fatalf("eval %s: %v", d.Name, err)
	}
	for _, a := range rep.Agents {
		if a.PassRate >= min {
			continue
		}
		var failed []string
		for _, cr := range a.Cases {
			if cr.Passed {
				continue
			}
			for _, ck := range cr.Checks {
				if !ck.Passed {
					failed = append(failed, fmt.Sprintf("%s#%d %s: %s (run %s)", cr.Case, cr.Trial, ck.Type, ck.Reason, cr.RunID))
					break
				}
			}
		}
		t.Errorf("eval %s: %s passed %d of %d (%.0f%%), under %.0f%%:\n  %s", d.Name, a.Agent, a.Passed, a.Total,
			100*a.PassRate, 100*min, strings.Join(failed, "\n  "))
	}
	return rep
}
