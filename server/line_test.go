package server

import (
	"context"
	"testing"
)

// TestLine: each message in a conversation's line goes once the one
// ahead of it has gone; one that gives up early lets nobody pass those
// ahead of it; the line is forgotten once empty.
func TestLine(t *testing.T) {
	s := &Server{closing: make(chan struct{})}
	gone := func(p *place) bool {
		select {
		case <-p.ahead:
			return true
		default:
			return false
		}
	}
	first, second, third := s.lineUp("c"), s.lineUp("c"), s.lineUp("c")
	other := s.lineUp("d")
	for _, tc := range []struct {
		name string
		p    *place
		want bool
	}{{"the first goes at once", first, true}, {"the second waits", second, false}, {"the third waits", third, false}, {"another conversation's goes", other, true}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := gone(tc.p); got != tc.want {
				t.Errorf("may go: %v, want %v", got, tc.want)
			}
		})
	}
	second.leave() // gives up before the first went
	if gone(third) {
		t.Error("the third passed the first")
	}
	first.leave()
	if err := third.wait(context.Background()); err != nil {
		t.Error(err)
	}
	third.leave()
	other.leave()
	if len(s.lines) != 0 {
		t.Errorf("lines left: %v", s.lines)
	}
	close(s.closing)
	if err := s.lineUp("c").wait(context.Background()); err != nil {
		t.Errorf("the first of a new line: %v", err)
	}
	if err := s.lineUp("c").wait(context.Background()); err != errClosing {
		t.Errorf("waiting as the server closes: %v", err)
	}
}
