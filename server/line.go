package server

import (
	"context"
	"errors"
)

// errClosing: a message waited for a busy conversation as the server
// began to close.
var errClosing = errors.New("the server is shutting down; send the message again")

// line is the messages that wait for a busy conversation on this server
// (if_busy queue or interrupt), in the order they came: each goes once
// the one before it has joined the conversation (or given up), so that
// they run in that order.
type line struct {
	tail    chan struct{} // closed when the newest in line has gone
	waiting int
}

// place is a message's place in a conversation's line.
type place struct {
	s     *Server
	conv  string
	ahead <-chan struct{} // closed when the message ahead has gone
	mine  chan struct{}
}

// lineUp puts a message at the end of conv's line.
func (s *Server) lineUp(conv string) *place {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lines == nil {
		s.lines = map[string]*line{}
	}
	l := s.lines[conv]
	if l == nil {
		first := make(chan struct{})
		close(first)
		l = &line{tail: first}
		s.lines[conv] = l
	}
	p := &place{s: s, conv: conv, ahead: l.tail, mine: make(chan struct{})}
	l.tail = p.mine
	l.waiting++
	return p
}

// wait waits for the message ahead to go.
func (p *place) wait(ctx context.Context) error {
	select {
	case <-p.ahead:
		return nil // first, though the server closes: it is its turn
	default:
	}
	select {
	case <-p.ahead:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-p.s.closing:
		return errClosing
	}
}

// leave lets the next in line go, once the one ahead has gone too (a
// message that gives up does not let those behind it pass those ahead
// of it); nil (no place) does nothing.
func (p *place) leave() {
	if p == nil {
		return
	}
	select {
	case <-p.ahead:
		close(p.mine)
	default:
		go func() { <-p.ahead; close(p.mine) }()
	}
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	if l := p.s.lines[p.conv]; l != nil {
		if l.waiting--; l.waiting == 0 {
			delete(p.s.lines, p.conv)
		}
	}
}
