package event

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultBuffer is how many events may wait for a subscriber before its
// policy applies.
const DefaultBuffer = 1024

// Bus delivers events to subscribers in one total order, even when
// published from several goroutines. Each subscriber is called one event
// at a time and in order, never by Publish, so a slow subscriber delays
// nobody but itself: events wait in its buffer, and when the buffer is
// full its policy applies (see Subscribe). Deliveries run on a goroutine
// of their own, except that Flush, which waits for them anyway, makes the
// delivery itself when none is under way. Events are handed
// over in batches, at most Latency after the first one waits. Publishing when
// nobody listens costs an atomic load; a subscriber with nothing to do
// holds no goroutine. The zero Bus is ready to use.
type Bus struct {
	parent *Bus
	active atomic.Int32
	pub    sync.Mutex // orders publishes: Seq and the order of every queue
	seq    uint64
	edit   sync.Mutex // guards changes to subs, never held while waiting
	subs   atomic.Pointer[[]*subscriber]
}

// NewBus returns a bus that also forwards every event to parent (which
// may be nil): a session's bus forwards to its service's.
func NewBus(parent *Bus) *Bus { return &Bus{parent: parent} }

// Init makes the zero Bus b one that forwards to parent, in place: for a
// bus kept in a struct that is allocated anyway. It must not be called
// on a bus in use.
func (b *Bus) Init(parent *Bus) { b.parent = parent }

// Option configures a subscription.
type Option func(*subscriber)

// Buffer sets how many events may wait for the subscriber (default
// DefaultBuffer). Values below 1 mean 1.
func Buffer(n int) Option { return func(s *subscriber) { s.limit = max(n, 1) } }

// Block makes the publisher wait while the subscriber's buffer is full,
// instead of dropping the event. It is for sinks that must not lose an
// event (a file of events, a run store); a blocking subscriber that stops
// reading stalls every run that publishes to its bus, so it must keep up.
func Block() Option { return func(s *subscriber) { s.block = true } }

// Types limits the subscription to events of the given types (none given:
// every type). Seq stays the bus's: a subscriber of some types sees gaps. A subscriber that does
// not take content_chunk spares a run the cost of streaming its model
// calls (see Wants).
func Types(types ...Type) Option {
	return func(s *subscriber) { s.types = slices.Clip(slices.Clone(types)) }
}

// Inline calls the subscriber from Publish itself, in order, before
// Publish returns: nothing is queued and nothing is lost, and the run
// waits for it. It is for a sink that only keeps events in memory (a
// run log's buffer); such a fn must be quick, and must not publish,
// subscribe or flush.
func Inline() Option { return func(s *subscriber) { s.inline = true } }

// Except limits the subscription to events of every type but the given
// ones: a sink that keeps whole replies, not their pieces, takes
// Except(ContentChunk), and so does not make runs stream.
func Except(types ...Type) Option {
	return func(s *subscriber) { s.except = slices.Clip(slices.Clone(types)) }
}

// Active reports whether anyone listens, here or on a parent.
func (b *Bus) Active() bool {
	for ; b != nil; b = b.parent {
		if b.active.Load() > 0 {
			return true
		}
	}
	return false
}

// Wants reports whether anyone listens to events of type t, here or on a
// parent.
func (b *Bus) Wants(t Type) bool {
	for ; b != nil; b = b.parent {
		if b.active.Load() == 0 {
			continue
		}
		if subs := b.subs.Load(); subs != nil {
			for _, s := range *subs {
				if s.wants(t) {
					return true
				}
			}
		}
	}
	return false
}

// Publish delivers e to every subscriber, then to the parent bus. It sets
// e.Seq. It returns without waiting for the subscribers, except for a
// blocking one whose buffer is full.
func (b *Bus) Publish(e Event) {
	if b == nil {
		return
	}
	if b.active.Load() > 0 {
		b.pub.Lock()
		b.seq++
		e.Seq = b.seq
		if subs := b.subs.Load(); subs != nil {
			for _, s := range *subs {
				switch {
				case !s.wants(e.Type):
				case s.inline:
					if !s.stopped.Load() && !s.call(&e) {
						b.remove(s)
					}
				default:
					s.enqueue(&e)
				}
			}
		}
		b.pub.Unlock()
	}
	b.parent.Publish(e)
}

// Subscribe calls fn with each event published from now on, in order,
// never from Publish, until unsubscribe is called. By default a
// subscriber that falls a buffer (DefaultBuffer events) behind loses the
// oldest events waiting for it, and the first event it gets after the gap
// says how many in Dropped: a live view never stalls a run, and always
// gets the latest events. With Block the publisher waits instead. A panic
// in fn unsubscribes it and is logged.
//
// Unsubscribe returns at once, even when called from fn; events not yet
// delivered are discarded. To wait until fn has seen every event published
// so far, call Flush first (a session's Run does so before it returns).
// fn must not publish to the bus it listens to.
func (b *Bus) Subscribe(fn func(Event), opts ...Option) (unsubscribe func()) {
	s := b.add(fn, opts)
	var once sync.Once
	return func() { once.Do(func() { b.remove(s) }) }
}

func (b *Bus) add(fn func(Event), opts []Option) *subscriber {
	s := &subscriber{fn: fn, bus: b, limit: DefaultBuffer}
	s.cond.L = &s.mu
	for _, o := range opts {
		o(s)
	}
	b.edit.Lock()
	defer b.edit.Unlock()
	var subs []*subscriber
	if p := b.subs.Load(); p != nil {
		subs = append(subs, *p...)
	}
	subs = append(subs, s)
	b.subs.Store(&subs)
	b.active.Add(1)
	return s
}

// remove takes s off the bus and stops its delivery, without waiting for
// a call of fn in progress (it may be the caller).
func (b *Bus) remove(s *subscriber) {
	b.edit.Lock()
	if p := b.subs.Load(); p != nil {
		for i, x := range *p {
			if x == s {
				subs := append(append([]*subscriber(nil), (*p)[:i]...), (*p)[i+1:]...)
				b.subs.Store(&subs)
				b.active.Add(-1)
				break
			}
		}
	}
	b.edit.Unlock()
	s.close()
}

// Flush waits until every subscriber of the bus has been called with
// every event published before Flush was called (or has unsubscribed).
// Subscribers of a parent bus are not waited for: a session flushes its
// own listeners, not those of the service it reports to, so a stuck
// viewer of the service holds no session. Flush must not be called from
// a subscriber of the bus.
func (b *Bus) Flush() {
	if b == nil || b.active.Load() == 0 {
		return
	}
	if p := b.subs.Load(); p != nil {
		for _, s := range *p {
			s.flush()
		}
	}
}

// Channel returns a channel that receives each event, and a function that
// stops the subscription and closes the channel. Up to buffer events wait
// for the reader; then the policy of Subscribe applies (by default, later
// the oldest waiting events are dropped and counted in Dropped). Stop may be called from any
// goroutine, and more than once; the channel is closed when it returns.
func (b *Bus) Channel(buffer int, opts ...Option) (<-chan Event, func()) {
	ch := make(chan Event)
	done := make(chan struct{})
	s := b.add(func(e Event) {
		select {
		case ch <- e:
		case <-done:
		}
	}, append([]Option{Buffer(buffer)}, opts...))
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			close(done)
			b.remove(s)
			s.wait()
			close(ch)
		})
	}
}

// All returns an iterator over the events published from now on until ctx
// is done or the loop stops. Events wait in a buffer of DefaultBuffer.
func (b *Bus) All(ctx context.Context, opts ...Option) iter.Seq[Event] {
	return func(yield func(Event) bool) {
		ch, stop := b.Channel(DefaultBuffer, opts...)
		defer stop()
		for {
			select {
			case e := <-ch:
				if !yield(e) {
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}
}

// Latency is how long an event may wait before its subscriber's delivery
// starts. Events are handed over in batches: a run publishes its events in
// bursts, and starting a goroutine for each one would cost a run more than
// everything else it does. A full buffer, Flush and a run's end start the
// delivery at once.
const Latency = time.Millisecond

// queues recycles the arrays of subscribers' queues: most subscriptions
// live as long as a run, and growing a fresh queue for each would cost a
// run more than its events.
var queues = sync.Pool{New: func() any { q := make([]Event, 0, 64); return &q }}

func getQueue() []Event { return (*queues.Get().(*[]Event))[:0] }

func putQueue(q []Event) {
	if cap(q) == 0 || cap(q) > 4*DefaultBuffer {
		return
	}
	clear(q[:cap(q)])
	q = q[:0]
	queues.Put(&q)
}

// subscriber is one subscription: a bounded queue drained by a goroutine
// that exists only while there is something to deliver.
type subscriber struct {
	fn     func(Event)
	bus    *Bus
	limit  int
	block  bool
	types  []Type // nil: every type
	except []Type // types it does not take
	inline bool   // called from Publish

	mu      sync.Mutex
	cond    sync.Cond // signals progress: space freed, events handled, stopped
	queue   []Event
	spare   []Event     // the last batch's array, reused
	running bool        // a goroutine is delivering
	timer   *time.Timer // starts a delivery Latency after the first waiting event
	armed   bool        // timer is set and has not started its delivery yet
	closed  bool
	stopped atomic.Bool // closed, readable without the lock
	queued  uint64      // events accepted, ever
	handled uint64      // events delivered or discarded, ever
}

func (s *subscriber) wants(t Type) bool {
	return (s.types == nil || slices.Contains(s.types, t)) && !slices.Contains(s.except, t)
}

// enqueue is called with the bus's publish lock held, which orders queues.
// The buffer is the queue of events waiting; the batch being delivered is
// not counted. When it is full, a blocking subscriber makes the publisher
// wait; any other loses the oldest waiting event, whose successor carries
// the count, so the latest events (a run's end) always arrive.
func (s *subscriber) enqueue(e *Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.block && !s.closed && len(s.queue) >= s.limit {
		s.cond.Wait()
	}
	if s.closed {
		return
	}
	var lost uint64 // carried to e when nothing else waits
	if len(s.queue) >= s.limit {
		lost = s.queue[0].Dropped + 1
		s.queue[0] = Event{}
		s.queue = s.queue[1:]
		s.handled++
		if len(s.queue) > 0 {
			s.queue[0].Dropped += lost
			lost = 0
		}
	}
	if s.queue == nil {
		s.queue = getQueue()
	}
	s.queue = append(s.queue, *e) // *e is shared by every subscriber: change only the copy
	s.queue[len(s.queue)-1].Dropped += lost
	s.queued++
	switch {
	case s.running:
	case len(s.queue) >= s.limit:
		s.start() // a full buffer cannot wait
	case !s.armed:
		s.armed = true
		if s.timer == nil {
			s.timer = time.AfterFunc(Latency, s.kick)
		} else {
			s.timer.Reset(Latency)
		}
	}
}

// start starts a delivery now, unless the timer has fired and its kick
// is about to; s.mu is held and no delivery runs.
func (s *subscriber) start() {
	if s.armed {
		if !s.timer.Stop() {
			return
		}
		s.armed = false
	}
	s.running = true
	go s.deliver()
}

// kick is the timer's: it delivers what waits, on the timer's goroutine.
func (s *subscriber) kick() {
	s.mu.Lock()
	s.armed = false
	if s.running || s.closed || len(s.queue) == 0 {
		s.mu.Unlock()
		return
	}
	s.running = true
	s.mu.Unlock()
	s.deliver()
}

// deliver calls fn for each queued event, a batch at a time, and returns
// when the queue is empty or the subscription stopped.
func (s *subscriber) deliver() {
	for {
		s.mu.Lock()
		if s.closed || len(s.queue) == 0 {
			s.handled = s.queued
			s.running = false
			putQueue(s.queue)
			putQueue(s.spare)
			s.queue, s.spare = nil, nil
			s.cond.Broadcast()
			s.mu.Unlock()
			return
		}
		batch := s.queue
		s.queue = s.spare[:0]
		s.spare = nil
		s.mu.Unlock()
		n := 0
		for i := range batch {
			if s.stopped.Load() {
				break
			}
			if !s.call(&batch[i]) {
				s.bus.remove(s)
				break
			}
			batch[i] = Event{} // let the event's data go
			n++
		}
		clear(batch[n:])
		s.mu.Lock()
		s.handled += uint64(len(batch))
		s.spare = batch[:0]
		s.cond.Broadcast()
		s.mu.Unlock()
	}
}

func (s *subscriber) call(e *Event) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			slog.Error("agentry: event subscriber panicked; unsubscribed", "event", string(e.Type), "panic", fmt.Sprint(r))
			ok = false
		}
	}()
	s.fn(*e)
	return true
}

// close stops delivery: what waits in the queue is discarded, and a
// publisher blocked on the queue goes on.
func (s *subscriber) close() {
	s.mu.Lock()
	s.closed = true
	s.stopped.Store(true)
	s.queue = nil
	if s.armed && s.timer.Stop() {
		s.armed = false
	}
	if !s.running {
		s.handled = s.queued
	}
	s.cond.Broadcast()
	s.mu.Unlock()
}

// flush waits until everything queued so far is handled and, unless more
// has been queued since, the delivering goroutine has ended: a run that
// flushes leaves no goroutine behind.
func (s *subscriber) flush() {
	s.mu.Lock()
	if !s.running && !s.closed && len(s.queue) > 0 && (!s.armed || s.timer.Stop()) {
		// The flusher waits for the delivery anyway, so it delivers itself:
		// starting a goroutine to wait for would cost a short run more
		// than all its events.
		s.armed, s.running = false, true
		s.mu.Unlock()
		s.deliver()
		s.mu.Lock()
	}
	for target := s.queued; !s.closed && (s.handled < target || s.running && s.queued == target); {
		s.cond.Wait()
	}
	s.mu.Unlock()
}

// wait waits until no goroutine delivers to s.
func (s *subscriber) wait() {
	s.mu.Lock()
	for s.running {
		s.cond.Wait()
	}
	s.mu.Unlock()
}
