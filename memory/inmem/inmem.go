// Package inmem is the memory backend that keeps everything in the
// process. Importing it registers "mem:" with memory.Open; an agent
// links it, so a spec's "mem:" always opens.
package inmem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/agentry/agentry/memory"
	"github.com/agentry/agentry/memory/memdriver"
)

// inMemory is the backend in the process: what the tests use, and what
// an agent without a backend remembers until the process ends.
type inMemory struct {
	mu      sync.Mutex
	seq     int64
	streams map[string][]memory.Entry
	colls   map[string]map[string]memory.Doc
	closed  bool
}

// New returns a backend that keeps everything in the process ("mem:").
func New() memory.Backend {
	return &inMemory{streams: map[string][]memory.Entry{}, colls: map[string]map[string]memory.Doc{}}
}

var errClosed = errors.New("memory: the backend is closed")

func (m *inMemory) Memory() memory.Memory { return (*inMemoryStreams)(m) }
func (m *inMemory) DB() memory.DB         { return (*inMemoryDocs)(m) }

func (m *inMemory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

type inMemoryStreams inMemory

// lock locks the backend, unless it is closed.
func (m *inMemory) lock() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return errClosed
	}
	return nil
}

func (s *inMemoryStreams) Append(ctx context.Context, e memory.Entry, keep memory.Retention) (memory.Entry, error) {
	if err := memdriver.CheckEntry(e, keep); err != nil {
		return memory.Entry{}, err
	}
	m := (*inMemory)(s)
	if err := m.lock(); err != nil {
		return memory.Entry{}, err
	}
	defer m.mu.Unlock()
	m.seq++
	e = memdriver.Stamp(ctx, e, keep, m.seq, time.Now())
	now := e.Time
	kept := slices.DeleteFunc(m.streams[e.Stream], func(x memory.Entry) bool { return memdriver.Expired(x, now) })
	kept = append(kept, e)
	if keep.MaxEntries > 0 && len(kept) > keep.MaxEntries {
		kept = slices.Delete(kept, 0, len(kept)-keep.MaxEntries)
	}
	m.streams[e.Stream] = kept
	return e, nil
}

func (s *inMemoryStreams) Read(ctx context.Context, stream string, o memory.ReadOptions) ([]memory.Entry, error) {
	if err := memdriver.CheckRead(stream, o); err != nil {
		return nil, err
	}
	m := (*inMemory)(s)
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	return memdriver.ReadEntries(m.streams[stream], o, time.Now()), nil
}

func (s *inMemoryStreams) Search(ctx context.Context, query string, o memory.SearchOptions) ([]memory.Hit, error) {
	if err := memdriver.CheckName("stream", o.Stream); err != nil {
		return nil, err
	}
	m := (*inMemory)(s)
	if err := m.lock(); err != nil {
		return nil, err
	}
	live := memdriver.ReadEntries(m.streams[o.Stream], memory.ReadOptions{}, time.Now())
	m.mu.Unlock()
	return memdriver.SearchEntries(live, query, o.Limit), nil
}

func (s *inMemoryStreams) Clear(ctx context.Context, stream string) error {
	if err := memdriver.CheckName("stream", stream); err != nil {
		return err
	}
	m := (*inMemory)(s)
	if err := m.lock(); err != nil {
		return err
	}
	defer m.mu.Unlock()
	delete(m.streams, stream)
	return nil
}

type inMemoryDocs inMemory

func (s *inMemoryDocs) Write(ctx context.Context, d memory.Doc) (memory.Doc, error) {
	d, err := memdriver.CheckDoc(d)
	if err != nil {
		return memory.Doc{}, err
	}
	m := (*inMemory)(s)
	if err := m.lock(); err != nil {
		return memory.Doc{}, err
	}
	defer m.mu.Unlock()
	d.Time = time.Now().UTC().Truncate(time.Microsecond)
	if m.colls[d.Collection] == nil {
		m.colls[d.Collection] = map[string]memory.Doc{}
	}
	m.colls[d.Collection][d.Key] = d
	return copyDoc(d), nil
}

func (s *inMemoryDocs) Read(ctx context.Context, collection, key string) (memory.Doc, error) {
	if err := errors.Join(memdriver.CheckName("collection", collection), memdriver.CheckName("key", key)); err != nil {
		return memory.Doc{}, err
	}
	m := (*inMemory)(s)
	if err := m.lock(); err != nil {
		return memory.Doc{}, err
	}
	defer m.mu.Unlock()
	d, ok := m.colls[collection][key]
	if !ok {
		return memory.Doc{}, fmt.Errorf("%w: %s/%s", memory.ErrNotFound, collection, key)
	}
	return copyDoc(d), nil
}

// all returns copies of a collection's documents.
func (s *inMemoryDocs) all(collection string) ([]memory.Doc, error) {
	m := (*inMemory)(s)
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	out := make([]memory.Doc, 0, len(m.colls[collection]))
	for _, d := range m.colls[collection] {
		out = append(out, copyDoc(d))
	}
	return out, nil
}

func (s *inMemoryDocs) Query(ctx context.Context, collection string, q memory.Query) ([]memory.Doc, error) {
	if err := errors.Join(memdriver.CheckName("collection", collection), memdriver.CheckQuery(q)); err != nil {
		return nil, err
	}
	docs, err := s.all(collection)
	if err != nil {
		return nil, err
	}
	return memdriver.Select(docs, q)
}

func (s *inMemoryDocs) Search(ctx context.Context, collection, text string, topK int) ([]memory.DocHit, error) {
	if err := memdriver.CheckName("collection", collection); err != nil {
		return nil, err
	}
	docs, err := s.all(collection)
	if err != nil {
		return nil, err
	}
	return memdriver.SearchDocs(docs, text, topK), nil
}

// copyDoc copies a document's value, so that nobody shares it with the
// backend.
func copyDoc(d memory.Doc) memory.Doc {
	data, _ := json.Marshal(d.Value) // it came from JSON (CheckDoc)
	d.Value = nil
	json.Unmarshal(data, &d.Value)
	return d
}

func init() {
	memory.Register("mem", func(context.Context, string) (memory.Backend, error) { return New(), nil })
}
