package storetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agentry/agentry/store"
)

func audit(run, rule, decision string) store.AuditRecord {
	return store.AuditRecord{RunID: run, Agent: "adder", UserID: "u1", Rule: rule, Decision: decision, Target: "tool:shell", Reason: "denied by tools.deny"}
}

func testAudit(t *testing.T, s store.Store) {
	ctx := context.Background()
	if err := s.VerifyAudit(ctx); err != nil {
		t.Errorf("an empty chain: %v", err)
	}
	var stored []store.AuditRecord
	for i, run := range []string{"run_a", "run_b", "run_a"} {
		r, err := s.AppendAudit(ctx, audit(run, "tools.deny", "block"))
		if err != nil {
			t.Fatal(err)
		}
		if r.Seq == 0 || r.Hash == "" || (i > 0 && r.Prev != stored[i-1].Hash) || (i == 0 && r.Prev != "") {
			t.Fatalf("record %d = %+v: want a sequence number and a hash chained to the one before", i, r)
		}
		stored = append(stored, r)
	}
	all, err := s.AuditLog(ctx, "")
	if err != nil || len(all) != 3 {
		t.Fatalf("AuditLog = %d records, %v", len(all), err)
	}
	for i := range all {
		if all[i] != stored[i] {
			t.Errorf("record %d read back as %+v, written as %+v", i, all[i], stored[i])
		}
	}
	mine, _ := s.AuditLog(ctx, "run_a")
	if len(mine) != 2 || mine[0].RunID != "run_a" || mine[1].Seq <= mine[0].Seq {
		t.Errorf("AuditLog(run_a) = %+v", mine)
	}
	if err := s.VerifyAudit(ctx); err != nil {
		t.Errorf("VerifyAudit of an intact chain: %v", err)
	}
	if _, err := s.AppendAudit(ctx, store.AuditRecord{RunID: "run_a"}); err == nil {
		t.Error("an audit record without a rule and a decision was accepted")
	}
}

func testConcurrentAudit(t *testing.T, s store.Store) {
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 5 {
				if _, err := s.AppendAudit(ctx, audit(fmt.Sprintf("run_%d", i), "rate_limits.*", "wait")); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	all, err := s.AuditLog(ctx, "")
	if err != nil || len(all) != 40 {
		t.Fatalf("AuditLog = %d records, %v; want 40", len(all), err)
	}
	if err := s.VerifyAudit(ctx); err != nil {
		t.Errorf("concurrent writers broke the chain: %v", err)
	}
}

// testVerifyWhileAppending verifies the chain again and again while
// records are appended: an append that lands between reading the
// records and reading the head is no tampering.
func testVerifyWhileAppending(t *testing.T, s store.Store) {
	ctx := context.Background()
	const writers, each = 2, 100
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			for range each {
				if _, err := s.AppendAudit(ctx, audit(fmt.Sprintf("run_%d", i), "approval.tools", "pause")); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for verified := 0; ; verified++ {
		select {
		case <-done:
			if err := s.VerifyAudit(ctx); err != nil {
				t.Errorf("after %d verifications while appending: %v", verified, err)
			}
			return
		default:
		}
		if err := s.VerifyAudit(ctx); err != nil {
			<-done
			t.Fatalf("verification %d, while appending: %v", verified, err)
		}
	}
}

// testAuditTampered edits, deletes and cuts records behind the store's
// back, in its SQL database, and expects VerifyAudit to name the record.
func testAuditTampered(t *testing.T, s store.Store) {
	db, ok := s.(interface{ SQL() *sql.DB })
	if !ok {
		return // a backend that is not SQL tampers its own way
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name, sql, want string
	}{
		{"edited", `UPDATE agentry_audit SET decision = 'allow' WHERE seq = (SELECT MIN(seq) + 1 FROM agentry_audit)`, "was changed"},
		{"deleted", `DELETE FROM agentry_audit WHERE seq = (SELECT MIN(seq) + 1 FROM agentry_audit)`, "removed or changed"},
		{"cut", `DELETE FROM agentry_audit WHERE seq = (SELECT MAX(seq) FROM agentry_audit)`, "removed from the end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := db.SQL().ExecContext(ctx, `DELETE FROM agentry_audit`); err != nil {
				t.Fatal(err)
			}
			if _, err := db.SQL().ExecContext(ctx, `UPDATE agentry_audit_head SET seq = 0, hash = ''`); err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if _, err := s.AppendAudit(ctx, audit("run_a", "approval.tools", "pause")); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := db.SQL().ExecContext(ctx, tc.sql); err != nil {
				t.Fatal(err)
			}
			err := s.VerifyAudit(ctx)
			if !errors.Is(err, store.ErrAuditBroken) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("VerifyAudit after the chain was %s = %v, want ErrAuditBroken saying %q", tc.name, err, tc.want)
			}
		})
	}
}
