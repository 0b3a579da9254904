package sqlstore

import "sync"

// watchers are the channels waiting for a run's writes, by run.
type watchers struct {
	mu sync.Mutex
	by map[string][]chan struct{}
}

// Watch returns a channel that receives after this process's writes to
// runID (store.Watcher).
func (s *DB) Watch(runID string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w := &s.watchers
	w.mu.Lock()
	if w.by == nil {
		w.by = map[string][]chan struct{}{}
	}
	w.by[runID] = append(w.by[runID], ch)
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		list := w.by[runID]
		for i, c := range list {
			if c == ch {
				list = append(list[:i:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(w.by, runID)
		} else {
			w.by[runID] = list
		}
	}
}

// notify tells runID's watchers of a write; a watcher that has not yet
// taken the last one is told once.
func (w *watchers) notify(runID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ch := range w.by[runID] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
