package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// inMemory is the backend in the process: what the tests use, and what
// an agent without a backend remembers until the process ends.
type inMemory struct {
	mu      sync.Mutex
	seq     int64
	streams map[string][]Entry
	colls   map[string]map[string]Doc
	closed  bool
}

// NewInMemory returns a backend that keeps everything in the process
// ("mem:").
func NewInMemory() Backend {
	return &inMemory{streams: map[string][]Entry{}, colls: map[string]map[string]Doc{}}
}

var errClosed = errors.New("memory: the backend is closed")

func (m *inMemory) Memory() Memory { return (*inMemoryStreams)(m) }
func (m *inMemory) DB() DB         { return (*inMemoryDocs)(m) }

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

func (s *inMemoryStreams) Append(ctx context.Context, e Entry, keep Retention) (Entry, error) {
	if err := CheckEntry(e, keep); err != nil {
		return Entry{}, err
	}
	m := (*inMemory)(s)
	if err := m.lock(); err != nil {
		return Entry{}, err
	}
	defer m.mu.Unlock()
	m.seq++
	e = Stamp(e, keep, m.seq, time.Now())
	now := e.Time
	kept := slices.DeleteFunc(m.streams[e.Stream], func(x Entry) bool { return expired(x, now) })
	kept = append(kept, e)
	if keep.MaxEntries > 0 && len(kept) > keep.MaxEntries {
		kept = slices.Delete(kept, 0, len(kept)-keep.MaxEntries)
	}
	m.streams[e.Stream] = kept
	return e, nil
}

func (s *inMemoryStreams) Read(ctx context.Context, stream string, o ReadOptions) ([]Entry, error) {
	if err := CheckRead(stream, o); err != nil {
		return nil, err
	}
	m := (*inMemory)(s)
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	return ReadEntries(m.streams[stream], o, time.Now()), nil
}

func (s *inMemoryStreams) Search(ctx context.Context, query string, o SearchOptions) ([]Hit, error) {
	if err := CheckName("stream", o.Stream); err != nil {
		return nil, err
	}
	m := (*inMemory)(s)
	if err := m.lock(); err != nil {
		return nil, err
	}
	live := ReadEntries(m.streams[o.Stream], ReadOptions{}, time.Now())
	m.mu.Unlock()
	return SearchEntries(live, query, o.Limit), nil
}

func (s *inMemoryStreams) Clear(ctx context.Context, stream string) error {
	if err := CheckName("stream", stream); err != nil {
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

func (s *inMemoryDocs) Write(ctx context.Context, d Doc) (Doc, error) {
	d, err := CheckDoc(d)
	if err != nil {
		return Doc{}, err
	}
	m := (*inMemory)(s)
	if err := m.lock(); err != nil {
		return Doc{}, err
	}
	defer m.mu.Unlock()
	d.Time = time.Now().UTC().Truncate(time.Microsecond)
	if m.colls[d.Collection] == nil {
		m.colls[d.Collection] = map[string]Doc{}
	}
	m.colls[d.Collection][d.Key] = d
	return copyDoc(d), nil
}

func (s *inMemoryDocs) Read(ctx context.Context, collection, key string) (Doc, error) {
	if err := errors.Join(CheckName("collection", collection), CheckName("key", key)); err != nil {
		return Doc{}, err
	}
	m := (*inMemory)(s)
	if err := m.lock(); err != nil {
		return Doc{}, err
	}
	defer m.mu.Unlock()
	d, ok := m.colls[collection][key]
	if !ok {
		return Doc{}, fmt.Errorf("%w: %s/%s", ErrNotFound, collection, key)
	}
	return copyDoc(d), nil
}

// all returns copies of a collection's documents.
func (s *inMemoryDocs) all(collection string) ([]Doc, error) {
	m := (*inMemory)(s)
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	out := make([]Doc, 0, len(m.colls[collection]))
	for _, d := range m.colls[collection] {
		out = append(out, copyDoc(d))
	}
	return out, nil
}

func (s *inMemoryDocs) Query(ctx context.Context, collection string, q Query) ([]Doc, error) {
	if err := errors.Join(CheckName("collection", collection), CheckQuery(q)); err != nil {
		return nil, err
	}
	docs, err := s.all(collection)
	if err != nil {
		return nil, err
	}
	return Select(docs, q)
}

func (s *inMemoryDocs) Search(ctx context.Context, collection, text string, topK int) ([]DocHit, error) {
	if err := CheckName("collection", collection); err != nil {
		return nil, err
	}
	docs, err := s.all(collection)
	if err != nil {
		return nil, err
	}
	return SearchDocs(docs, text, topK), nil
}

// copyDoc copies a document's value, so that nobody shares it with the
// backend.
func copyDoc(d Doc) Doc {
	data, _ := json.Marshal(d.Value) // it came from JSON (CheckDoc)
	d.Value = nil
	json.Unmarshal(data, &d.Value)
	return d
}
