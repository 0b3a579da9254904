package agent

import "testing"

// TestOutcomeClasses: the jeeves seed's three questions of an outcome,
// for each of the nine; the pipeline routes by them.
func TestOutcomeClasses(t *testing.T) {
	for _, tc := range []struct {
		o                        Outcome
		success, terminal, loops bool
	}{
		{OutcomeSuccess, true, false, false},
		{OutcomePartial, true, false, false},
		{OutcomeSkip, true, false, false},
		{OutcomeError, false, true, false},
		{OutcomeTerminate, false, true, false},
		{OutcomeClarify, false, false, false},
		{OutcomeConfirm, false, false, false},
		{OutcomeReplan, false, false, true},
		{OutcomeLoopBack, false, false, true},
	} {
		t.Run(string(tc.o), func(t *testing.T) {
			if !tc.o.Valid() || tc.o.IsSuccess() != tc.success || tc.o.IsTerminal() != tc.terminal || tc.o.RequiresLoop() != tc.loops {
				t.Errorf("%s: success %v terminal %v loops %v", tc.o, tc.o.IsSuccess(), tc.o.IsTerminal(), tc.o.RequiresLoop())
			}
		})
	}
}
