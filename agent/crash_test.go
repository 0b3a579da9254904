package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/agentry/agentry/internal/journal"
	"github.com/agentry/agentry/store"
)

// The crash helper is this test binary run again with AGENTRY_CRASH_AT
// set (TestMain runs it instead of the tests): it runs the payer agent
// against the store AGENTRY_CRASH_DSN and kills itself with SIGKILL when
// it reaches that point.
const crashEnv = "AGENTRY_CRASH_AT"

func crashHelper() int {
	ctx := context.Background()
	st, err := store.Open(ctx, os.Getenv("AGENTRY_CRASH_DSN"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash helper:", err)
		return 3
	}
	h := killAt(os.Getenv(crashEnv))
	reg := durableTools(nil, ledger{os.Getenv("AGENTRY_CRASH_LEDGER")}, os.Getenv("AGENTRY_CRASH_DEDUP") == "1", h)
	a, input, err := crashScenario(os.Getenv(scenarioEnv), st, reg, h)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash helper:", err)
		return 3
	}
	_, err = a.Run(ctx, input, WithStore(hookedStore{Store: st, h: h}), WithUser("ada"))
	fmt.Fprintln(os.Stderr, "crash helper: the run ended without being killed:", err)
	return 4
}

// killedRun runs the payer agent in a child process killed at point, its
// pay tool deduplicating or not, its payments in l, and returns the id of
// the run it left in st.
func killedRun(t *testing.T, st *testStore, point string, dedup bool, l ledger) string {
	t.Helper()
	ctx := context.Background()
	before, err := st.List(ctx, store.Filter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	d := "0"
	if dedup {
		d = "1"
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"="+point, "AGENTRY_CRASH_DSN="+st.dsn, "AGENTRY_CRASH_LEDGER="+l.path, "AGENTRY_CRASH_DEDUP="+d)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("the helper was not killed at %s: %v\n%s", point, err, out)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the helper was not killed at %s: %v\n%s", point, err, out)
	}
	after, err := st.List(ctx, store.Filter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range after {
		if !slices.ContainsFunc(before, func(b store.Run) bool { return b.ID == r.ID }) {
			return r.ID
		}
	}
	t.Fatalf("the helper killed at %s left no run", point)
	return ""
}

// interruptedRun is a run of the deduplicating payer killed at point.
func interruptedRun(t *testing.T, st *testStore, point string) string {
	return killedRun(t, st, point, true, ledger{filepath.Join(t.TempDir(), "ledger")})
}

// A kill at every point of a turn resumes to the Result of a run that
// was never interrupted, and the payment takes effect once.
func TestKillAtEveryPoint(t *testing.T) {
	ctx := context.Background()
	ref := openStore(t, filepathJoin(t, "ref.db"))
	refLedger := ledger{filepath.Join(t.TempDir(), "ref-ledger")}
	want, err := payerAgent(t, durableTools(t, refLedger, true, nil)).Run(ctx, payerInput, WithStore(ref))
	if err != nil {
		t.Fatal(err)
	}
	points := []string{
		"before_model#1", "after_model#1", "tool_start:add#1", "tool_end:add#1",
		"before_model#2", "after_model#2", "tool_start:pay#1", "tool_end:pay#1", "tool_start:add#2", "tool_end:add#2",
		"before_model#3", "after_model#3", "final_write#1",
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			for _, point := range points {
				t.Run(point, func(t *testing.T) {
					st := openStore(t, b.dsn(t))
					l := ledger{filepath.Join(t.TempDir(), "ledger")}
					id := killedRun(t, st, point, true, l)
					interrupted, err := journal.Interrupted(ctx, st)
					if err != nil || len(interrupted) != 1 || interrupted[0].ID != id {
						t.Fatalf("Interrupted = %v, %v; want the killed run %s", interrupted, err, id)
					}
					a := storedAgent(t, st, id, WithTools(durableTools(t, l, true, nil)))
					got, err := resumeRun(t, a, st, id)
					if err != nil {
						t.Fatalf("resumed run: %v", err)
					}
					if got.ID != id {
						t.Errorf("the resumed run is %s, want %s", got.ID, id)
					}
					if g, w := comparable(t, got), comparable(t, want); g != w {
						t.Errorf("resumed Result differs from an uninterrupted run's:\n%s\nwant\n%s", g, w)
					}
					// The payment service saw one key, however often it was sent.
					sends := l.sends(t)
					if len(sends) == 0 || len(slices.Compact(slices.Clone(sends))) != 1 || sends[0] != id+":2:0" {
						t.Errorf("payments sent with keys %v; want one key, %s:2:0", sends, id)
					}
					if string(storedResult(t, st, id)) != mustMarshal(t, got) {
						t.Error("the stored Result is not the one the resumed run returned")
					}
					if run, _ := st.Get(ctx, id); run.Status != store.Completed {
						t.Errorf("status after the resume = %s, want completed", run.Status)
					}
				})
			}
		})
	}
}

// A payment that does not deduplicate and may have been sent pauses the
// resumed run for approval; a denial finishes it with the outcome
// unknown and nothing sent again, an approval sends it again.
func TestUnknownOutcomeAwaitsApproval(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			for _, decide := range []string{"deny", "approve"} {
				t.Run(decide, func(t *testing.T) {
					st := openStore(t, b.dsn(t))
					l := ledger{filepath.Join(t.TempDir(), "ledger")}
					id := killedRun(t, st, "tool_end:pay#1", false, l)
					a := storedAgent(t, st, id, WithTools(durableTools(t, l, false, nil)))
					res, err := resumeRun(t, a, st, id)
					if !errors.Is(err, ErrAwaitingApproval) || res.TerminateReason != ReasonAwaitingApproval || res.Outcome != OutcomeConfirm {
						t.Fatalf("resume = %v (%s, %s); want it to await approval", err, res.TerminateReason, res.Outcome)
					}
					var ae *ApprovalError
					if w := res.Waiting; len(w) != 1 || w[0].CallID != "call_2_1" || w[0].Tool != "pay" || w[0].Rule != "" ||
						!strings.Contains(w[0].Reason, "may have taken effect") || !errors.As(err, &ae) || ae.Key != w[0].Key {
						t.Errorf("the paused run names %+v (%v); want call_2_1 (pay), of unknown outcome", res.Waiting, err)
					}
					if run, _ := st.Get(ctx, id); run.Status != store.AwaitingApproval || run.Holder != "" {
						t.Errorf("stored status %s holder %q; want awaiting_approval and free", run.Status, run.Holder)
					}
					if n := len(l.sends(t)); n != 1 {
						t.Fatalf("the payment was sent %d times before a decision; want 1", n)
					}
					if _, err := a.Resume(ctx, st, id, Approve("call_9_9")); !errors.Is(err, ErrNoSuchCall) || !strings.Contains(err.Error(), "call_2_1") {
						t.Errorf("approving a call that does not wait: %v; want ErrNoSuchCall naming call_2_1", err)
					}
					opt := Deny("call_2_1")
					if decide == "approve" {
						opt = Approve("call_2_1")
					}
					res, err = resumeRun(t, a, st, id, opt)
					if err != nil || !res.Success {
						t.Fatalf("after %s: %v", decide, err)
					}
					pay := res.Steps[1]
					sends := l.sends(t)
					switch decide {
					case "deny":
						if len(sends) != 1 || pay.Action.Error == "" || !strings.Contains(pay.Observation, "unknown_outcome") {
							t.Errorf("denied: sent %d times, step %+v; want once and an unknown_outcome observation", len(sends), pay)
						}
					case "approve":
						if len(sends) != 2 || sends[0] != sends[1] || pay.Action.Error != "" {
							t.Errorf("approved: sent with keys %v, error %q; want twice with one key and no error", sends, pay.Action.Error)
						}
					}
				})
			}
		})
	}
}

func filepathJoin(t *testing.T, name string) string { return filepath.Join(t.TempDir(), name) }

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := jsonMarshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
