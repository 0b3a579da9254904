package agent

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/internal/journal"
	"github.com/agentry/agentry/store"
)

// Service is the long-lived entry point of a host: it creates per-run
// sessions, runs them, aborts them by id, fans their events out to its
// subscribers and stops cleanly. It holds a session only while it runs,
// so a session created and never run costs it nothing. It is safe for
// concurrent use.
type Service struct {
	bus     *event.Bus
	store   store.Store
	build   []Option
	mu      sync.Mutex
	running map[string]*Session
	stopped bool
	drained chan struct{} // closed when stopped and nothing runs
}

// ServiceOption configures NewService.
type ServiceOption func(*Service)

// StoreRuns makes every session the service creates durable in st
// (WithStore), and lets the service resume and list stored runs.
func StoreRuns(st store.Store) ServiceOption { return func(s *Service) { s.store = st } }

// BuildWith gives the options a resumed run's agent is built with, on
// top of the spec, model and directories its log recorded: the tools
// its spec names, above all.
func BuildWith(opts ...Option) ServiceOption {
	return func(s *Service) { s.build = append(s.build, opts...) }
}

// NewService returns a running service.
func NewService(opts ...ServiceOption) *Service {
	s := &Service{bus: event.NewBus(nil), running: map[string]*Session{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Resume continues the stored run runID (see Agent.Resume): its agent is
// built from the log with the service's BuildWith options, its events
// reach the service's subscribers, and Abort and Stop reach it.
func (s *Service) Resume(ctx context.Context, runID string, opts ...RunOption) (*Result, error) {
	if s.store == nil {
		return nil, ErrNoStore
	}
	a, err := Stored(ctx, s.store, runID, s.build...)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	sess, err := a.Resume(ctx, s.store, runID, append([]RunOption{WithEventBus(s.bus)}, opts...)...)
	if err != nil {
		return nil, err
	}
	sess.svc = s
	return sess.Run(ctx)
}

// Interrupted returns the stored runs whose process died: those Resume
// can continue (see the package function Interrupted).
func (s *Service) Interrupted(ctx context.Context) ([]store.Run, error) {
	if s.store == nil {
		return nil, ErrNoStore
	}
	return journal.Interrupted(ctx, s.store)
}

// Events returns the bus that carries the events of every session.
func (s *Service) Events() *event.Bus { return s.bus }

// Subscribe calls fn with every event of every session until the returned
// function is called; the options are those of event.Bus.Subscribe.
func (s *Service) Subscribe(fn func(event.Event), opts ...event.Option) (unsubscribe func()) {
	return s.bus.Subscribe(fn, opts...)
}

// CreateSession prepares a session of a with input. Its events reach the
// service's subscribers; the service tracks it while it runs, however it
// is run (Service.Run or Session.Run).
func (s *Service) CreateSession(a *Agent, input map[string]any, opts ...RunOption) (*Session, error) {
	s.mu.Lock()
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		return nil, ErrStopped
	}
	pre := []RunOption{WithEventBus(s.bus)}
	if s.store != nil {
		pre = append(pre, WithStore(s.store))
	}
	sess, err := a.NewSession(input, append(pre, opts...)...)
	if err != nil {
		return nil, err
	}
	sess.svc = s
	return sess, nil
}

// start tracks a session that begins to run.
func (s *Service) start(sess *Session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return ErrStopped
	}
	if _, dup := s.running[sess.ID()]; dup {
		return fmt.Errorf("agent: session id %q is already running", sess.ID())
	}
	s.running[sess.ID()] = sess
	return nil
}

// done forgets a session whose run ended.
func (s *Service) done(sess *Session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.running, sess.ID())
	if s.stopped && len(s.running) == 0 && s.drained != nil {
		close(s.drained)
		s.drained = nil
	}
}

// Run runs a session created by CreateSession.
func (s *Service) Run(ctx context.Context, sess *Session) (*Result, error) {
	if sess.svc != s {
		return nil, fmt.Errorf("%w %q: it was not created by this service", ErrUnknownSession, sess.ID())
	}
	return sess.Run(ctx)
}

// RunOnce creates a session of a with input and runs it.
func (s *Service) RunOnce(ctx context.Context, a *Agent, input map[string]any, opts ...RunOption) (*Result, error) {
	sess, err := s.CreateSession(a, input, opts...)
	if err != nil {
		return nil, err
	}
	return s.Run(ctx, sess)
}

// Abort aborts the running session with that id.
func (s *Service) Abort(id string) error {
	s.mu.Lock()
	sess, ok := s.running[id]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownSession, id)
	}
	sess.Abort()
	return nil
}

// Stop refuses new sessions and drains the running ones: each may end on
// its own (its last commit is a durable point) until ctx is done; those
// still running then are aborted, and Stop waits for them to end (at most
// a grace of 10 s, as a tool that ignores its context may not). It starts
// no goroutine.
func (s *Service) Stop(ctx context.Context) error {
	s.mu.Lock()
	s.stopped = true
	if len(s.running) == 0 {
		s.mu.Unlock()
		return nil
	}
	if s.drained == nil {
		s.drained = make(chan struct{})
	}
	drained := s.drained
	s.mu.Unlock()
	select {
	case <-drained:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	for _, sess := range s.running {
		sess.Abort()
	}
	s.mu.Unlock()
	grace := time.NewTimer(stopGrace)
	defer grace.Stop()
	select {
	case <-drained:
		return ctx.Err()
	case <-grace.C:
		s.mu.Lock()
		n := len(s.running)
		s.mu.Unlock()
		return fmt.Errorf("agent: service stopped with %d sessions still running after their abort: %w", n, ctx.Err())
	}
}

// stopGrace is how long Stop waits for aborted sessions to end.
var stopGrace = 10 * time.Second

// Health reports whether the service takes sessions: nil, ErrStopped once
// Stop was called, or the error of its run store when the store does not
// answer.
func (s *Service) Health(ctx context.Context) error {
	s.mu.Lock()
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		return ErrStopped
	}
	if s.store != nil {
		if _, err := s.store.List(ctx, store.Filter{Limit: 1}); err != nil {
			return fmt.Errorf("agent: the run store does not answer: %w", err)
		}
	}
	return nil
}
