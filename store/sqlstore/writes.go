package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"sync"

	"github.com/agentry/agentry/store"
)

// turn waits for the process's write turn (with Dialect.SerialWrites),
// and returns what ends it.
func (s *DB) turn(ctx context.Context) (func(), error) {
	if s.writer != nil {
		select {
		case s.writer <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.done, nil
}

// beginWrite begins a write transaction in the process's write turn;
// done ends the turn, after the transaction's Commit or Rollback.
func (s *DB) beginWrite(ctx context.Context) (tx *sql.Tx, done func(), err error) {
	if done, err = s.turn(ctx); err != nil {
		return nil, nil, err
	}
	if tx, err = s.db.BeginTx(ctx, nil); err != nil {
		done()
		return nil, nil, err
	}
	return tx, done, nil
}

// exec runs one write statement in the process's write turn.
func (s *DB) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	done, err := s.turn(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	return s.db.ExecContext(ctx, query, args...)
}

// pendingWrite is a write waiting for the transaction that commits it.
type pendingWrite struct {
	ctx  context.Context
	w    *store.Write
	err  error
	done chan struct{} // closed once its transaction committed, or it failed
}

// group is the writes waiting for the write turn.
type group struct {
	mu      sync.Mutex
	pending []*pendingWrite
}

// appendInGroup queues w and waits until a transaction holding it
// commits: its own, when it takes the write turn (then it commits every
// write queued by then), or another's. A write whose context ends while
// it is queued leaves the queue unwritten; once a transaction holds it,
// its outcome is that transaction's.
func (s *DB) appendInGroup(ctx context.Context, w *store.Write) error {
	p := &pendingWrite{ctx: ctx, w: w, done: make(chan struct{})}
	s.group.mu.Lock()
	s.group.pending = append(s.group.pending, p)
	s.group.mu.Unlock()
	cancelled := ctx.Done()
	for {
		select {
		case <-p.done:
			return p.err
		case s.writer <- struct{}{}:
			s.commitPending()
			s.done()
		case <-cancelled:
			if s.group.drop(p) {
				return fmt.Errorf("store: append to run %s: %w", w.RunID, ctx.Err())
			}
			cancelled = nil // a transaction holds it: wait for its outcome
		}
	}
}

// drop takes p out of the queue, and reports whether it was still there.
func (g *group) drop(p *pendingWrite) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, q := range g.pending {
		if q == p {
			g.pending = append(g.pending[:i], g.pending[i+1:]...)
			return true
		}
	}
	return false
}

// commitPending commits the writes queued now in one transaction, each
// in a savepoint: one that fails is rolled back, and the others commit.
// The caller holds the write turn.
func (s *DB) commitPending() {
	s.group.mu.Lock()
	batch := s.group.pending
	s.group.pending = nil
	s.group.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	defer func() {
		for _, p := range batch {
			close(p.done)
		}
	}()
	// The transaction is no one write's, nor are its statements: a
	// statement interrupted by its context's end would roll the whole
	// transaction back, the other writes with it. A write taken into the
	// transaction is applied whole.
	tx, err := s.db.BeginTx(context.Background(), nil)
	if err != nil {
		for _, p := range batch {
			p.err = fmt.Errorf("store: append to run %s: %w", p.w.RunID, err)
		}
		return
	}
	defer tx.Rollback()
	for _, p := range batch {
		if err := p.ctx.Err(); err != nil {
			p.err = fmt.Errorf("store: append to run %s: %w", p.w.RunID, err)
			continue
		}
		if _, err := tx.Exec("SAVEPOINT agentry_write"); err != nil {
			p.err = fmt.Errorf("store: append to run %s: %w", p.w.RunID, err)
			continue
		}
		p.err = s.apply(context.WithoutCancel(p.ctx), tx, p.w)
		if p.err != nil {
			if _, err := tx.Exec("ROLLBACK TO agentry_write"); err != nil {
				s.failAll(batch, err)
				return
			}
		}
		if _, err := tx.Exec("RELEASE agentry_write"); err != nil {
			s.failAll(batch, err)
			return
		}
	}
	if err := tx.Commit(); err != nil {
		s.failAll(batch, err)
		return
	}
	for _, p := range batch {
		if p.err == nil {
			s.watchers.notify(p.w.RunID)
		}
	}
}

// failAll fails the writes of a transaction that could not commit: none
// of them was written.
func (s *DB) failAll(batch []*pendingWrite, err error) {
	for _, p := range batch {
		if p.err == nil {
			p.err = fmt.Errorf("store: append to run %s: %w", p.w.RunID, err)
		}
	}
}
