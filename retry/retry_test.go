package retry

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	p := Policy{InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}
	tests := []struct {
		n    int
		want time.Duration
	}{{0, 0}, {1, 100 * time.Millisecond}, {2, 200 * time.Millisecond}, {4, 800 * time.Millisecond}, {5, time.Second}, {40, time.Second}}
	for _, tt := range tests {
		t.Run(tt.want.String(), func(t *testing.T) {
			if got := p.Backoff(tt.n); got != tt.want {
				t.Errorf("Backoff(%d) = %s, want %s", tt.n, got, tt.want)
			}
		})
	}
}

func TestDelay(t *testing.T) {
	p := Policy{InitialBackoff: 100 * time.Millisecond, Jitter: 0.5}
	for range 200 {
		d := p.Delay(context.Background(), 1, 0)
		if d < 50*time.Millisecond || d > 100*time.Millisecond {
			t.Fatalf("jittered delay %s outside [50ms, 100ms]", d)
		}
	}
	if d := p.Delay(context.Background(), 3, 7*time.Second); d != 7*time.Second {
		t.Errorf("Retry-After not honoured: %s", d)
	}
	if (Policy{}).Tries() != 1 || (Policy{Attempts: 4}).Tries() != 4 {
		t.Error("Tries")
	}
}

func TestSleep(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if Sleep(ctx, time.Hour) {
		t.Error("slept past the deadline")
	}
	if !Sleep(context.Background(), time.Microsecond) {
		t.Error("short sleep refused")
	}
	done, stop := context.WithCancel(context.Background())
	stop()
	if Sleep(done, 0) {
		t.Error("ended context goes on")
	}
}

// TestSeededJitter: waits drawn from a seeded source repeat with the seed.
func TestSeededJitter(t *testing.T) {
	p := Policy{Attempts: 5, InitialBackoff: time.Second, Jitter: 1}
	draw := func(seed uint64) []time.Duration {
		ctx := WithSource(context.Background(), rand.NewPCG(seed, seed))
		var out []time.Duration
		for n := 1; n <= 4; n++ {
			out = append(out, p.Delay(ctx, n, 0))
		}
		return out
	}
	a, b, c := draw(7), draw(7), draw(8)
	if !slices.Equal(a, b) || slices.Equal(a, c) {
		t.Errorf("seeded waits %v, %v, another seed %v", a, b, c)
	}
}
