package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/agentry/agentry/event"
)

// ErrStopped is returned by a Service that has been stopped.
var ErrStopped = errors.New("agent: service stopped")

// ErrUnknownSession is returned by Service.Abort for an id it does not know.
var ErrUnknownSession = errors.New("agent: unknown session")

// Service is the long-lived entry point of a host: it creates per-run
// sessions, runs them, aborts them by id, fans their events out to its
// subscribers and stops cleanly. It is safe for concurrent use.
type Service struct {
	bus      *event.Bus
	mu       sync.Mutex
	sessions map[string]*Session
	stopped  bool
	wg       sync.WaitGroup
}

// NewService returns a running service.
func NewService() *Service {
	return &Service{bus: event.NewBus(nil), sessions: map[string]*Session{}}
}

// Events returns the bus that carries the events of every session.
func (s *Service) Events() *event.Bus { return s.bus }

// Subscribe calls fn with every event of every session until the returned
// function is called.
func (s *Service) Subscribe(fn func(event.Event)) (unsubscribe func()) { return s.bus.Subscribe(fn) }

// CreateSession prepares a session of a with input. Its events reach the
// service's subscribers; it is tracked until its run ends.
func (s *Service) CreateSession(a *Agent, input map[string]any, opts ...RunOption) (*Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil, ErrStopped
	}
	sess, err := a.NewSession(input, append([]RunOption{WithEventBus(s.bus)}, opts...)...)
	if err != nil {
		return nil, err
	}
	if _, dup := s.sessions[sess.ID()]; dup {
		return nil, fmt.Errorf("agent: session id %q is in use", sess.ID())
	}
	s.sessions[sess.ID()] = sess
	return sess, nil
}

// Run runs a session created by CreateSession and forgets it afterwards.
func (s *Service) Run(ctx context.Context, sess *Session) (*Result, error) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil, ErrStopped
	}
	if s.sessions[sess.ID()] != sess {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w %q", ErrUnknownSession, sess.ID())
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.sessions, sess.ID())
		s.mu.Unlock()
		s.wg.Done()
	}()
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

// Abort aborts the session with that id.
func (s *Service) Abort(id string) error {
	s.mu.Lock()
	sess, ok := s.sessions[id]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownSession, id)
	}
	sess.Abort()
	return nil
}

// Sessions returns the ids of the sessions created and not yet finished.
func (s *Service) Sessions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.sessions))
	for id := range s.sessions {
		ids = append(ids, id)
	}
	return ids
}

// Stop refuses new sessions, aborts the running ones and waits for them to
// end, or for ctx.
func (s *Service) Stop(ctx context.Context) error {
	s.mu.Lock()
	s.stopped = true
	for _, sess := range s.sessions {
		sess.Abort()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
