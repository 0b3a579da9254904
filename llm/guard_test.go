package llm

import (
	"context"
	"fmt"
	"iter"
	"testing"
	"time"

	"github.com/agentry/agentry/retry"
)

// attempt is what one call of a staged provider does.
type attempt int

const (
	answer    attempt = iota // two chunks of text
	failFirst                // a transient error before any chunk
	failAfter                // a chunk, then a transient error
	panics                   // a panic before any chunk
	panicsMid                // a chunk, then a panic
	hangs                    // waits for its context to end
)

// staged plays one attempt per call, as Generate or as Stream.
type staged struct {
	plan  []attempt
	calls int
}

func (s *staged) next() attempt {
	a := s.plan[min(s.calls, len(s.plan)-1)]
	s.calls++
	return a
}

func (s *staged) Generate(ctx context.Context, req *Request) (*Response, error) {
	resp, err := Collect(s.Stream(ctx, req), nil)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (s *staged) Stream(ctx context.Context, _ *Request) iter.Seq2[Chunk, error] {
	a := s.next()
	return func(yield func(Chunk, error) bool) {
		switch a {
		case answer:
			_ = yield(Chunk{Text: "hel"}, nil) && yield(Chunk{Text: "lo"}, nil)
		case failFirst:
			yield(Chunk{}, &APIError{Kind: KindTransient, Message: "broke"})
		case failAfter:
			_ = yield(Chunk{Text: "par"}, nil) && yield(Chunk{}, &APIError{Kind: KindTransient, Message: "broke"})
		case panics:
			panic("provider bug")
		case panicsMid:
			if yield(Chunk{Text: "par"}, nil) {
				panic("provider bug")
			}
		case hangs:
			<-ctx.Done()
			yield(Chunk{}, ctx.Err())
		}
	}
}

// TestGuardIsRetryTimeoutRecover holds Guard to the three middleware it
// fuses: every scenario, called and streamed, ends the same through both.
func TestGuardIsRetryTimeoutRecover(t *testing.T) {
	policy := retry.Policy{Attempts: 3, InitialBackoff: time.Millisecond}
	const d = 20 * time.Millisecond
	plans := map[string][]attempt{
		"answers":                    {answer},
		"retried before a chunk":     {failFirst, failFirst, answer},
		"gives up after attempts":    {failFirst},
		"not retried after a chunk":  {failAfter, answer},
		"a panic is an error":        {panics, answer},
		"a panic mid-stream":         {panicsMid, answer},
		"a timeout is retried":       {hangs, answer},
		"timeouts until it gives up": {hangs},
	}
	type outcome struct {
		content string
		kind    Kind
		failed  bool
		calls   int
	}
	run := func(mw Middleware, plan []attempt, stream bool) outcome {
		s := &staged{plan: plan}
		p := mw(s)
		var resp *Response
		var err error
		if stream {
			resp, err = Collect(p.(Streamer).Stream(context.Background(), &Request{Model: "m"}), nil)
		} else {
			resp, err = p.Generate(context.Background(), &Request{Model: "m"})
		}
		o := outcome{kind: KindOf(err), failed: err != nil, calls: s.calls}
		if resp != nil {
			o.content = resp.Content
		}
		return o
	}
	chain := func(next Provider) Provider { return Chain(next, Retry(policy), Timeout(d), Recover()) }
	for name, plan := range plans {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", name, stream), func(t *testing.T) {
				want := run(chain, plan, stream)
				got := run(Guard(policy, d, true), plan, stream)
				if got != want {
					t.Errorf("Guard: %+v, the three middleware: %+v", got, want)
				}
				answers := name == "answers" || name == "retried before a chunk" || name == "a timeout is retried" ||
					name == "not retried after a chunk" && !stream // a call has no chunks to have sent
				if answers != (got.content == "hello" && !got.failed) {
					t.Errorf("got %+v; an answer expected: %v", got, answers)
				}
			})
		}
	}
}

// TestGuardLeavesTheCallersPanicAlone: a panic of the caller's loop body
// passes through a recovering stream untouched.
func TestGuardLeavesTheCallersPanicAlone(t *testing.T) {
	p := Guard(retry.Policy{Attempts: 2}, time.Second, true)(&staged{plan: []attempt{answer}}).(Streamer)
	defer func() {
		if r := recover(); r != "caller bug" {
			t.Errorf("recovered %v, want the caller's own panic", r)
		}
	}()
	for range p.Stream(context.Background(), &Request{}) {
		panic("caller bug")
	}
	t.Error("the loop body did not run")
}

// TestGuardStreamStopsWhenTheCallerDoes: breaking out of the loop ends the
// stream without a retry or an error.
func TestGuardStreamStopsWhenTheCallerDoes(t *testing.T) {
	s := &staged{plan: []attempt{answer}}
	p := Guard(retry.Policy{Attempts: 3}, time.Second, true)(s).(Streamer)
	n := 0
	for _, err := range p.Stream(context.Background(), &Request{}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		break
	}
	if n != 1 || s.calls != 1 {
		t.Errorf("%d chunks from %d calls, want 1 from 1", n, s.calls)
	}
}
