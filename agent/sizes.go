package agent

import "sync/atomic"

// sizes remembers how long an agent's runs are, so that a run makes its
// trace (messages, model calls, steps) the right size at once
// instead of growing it turn by turn, and a one-turn run does not pay for
// a long one. A hint follows the longest recent run and decays by a
// quarter a run, so one long run does not inflate the next hundred.
type sizes struct {
	messages, calls, steps atomic.Int32
}

// maxSizeHint bounds what a hint reserves; longer runs grow as they go.
const maxSizeHint = 64

func hint(v *atomic.Int32) int { return int(v.Load()) }

func learn(v *atomic.Int32, n int) {
	old := v.Load()
	next := max(int32(min(n, maxSizeHint)), old-old/4)
	if next != old {
		v.Store(next) // a hint: a lost update between concurrent runs costs nothing
	}
}

// learn records the sizes a run ended with.
func (s *sizes) learn(st *State) {
	learn(&s.messages, len(st.Messages))
	learn(&s.calls, len(st.ModelCalls))
	learn(&s.steps, len(st.Steps))
}
