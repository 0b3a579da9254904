// Package registry is the name → implementation table that providers,
// store backends and connectors register into from their packages' init,
// in the manner of database/sql drivers.
package registry

import (
	"iter"
	"maps"
	"slices"
	"sync"
)

// Registry maps names to values of T; the zero value is empty and ready.
// It is safe for concurrent use.
type Registry[T any] struct {
	mu sync.RWMutex
	m  map[string]T
}

// Add registers v under name and reports false, registering nothing,
// when name is taken (callers panic: a name registered twice is a
// programming error).
func (r *Registry[T]) Add(name string, v T) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.m[name]; dup {
		return false
	}
	if r.m == nil {
		r.m = map[string]T{}
	}
	r.m[name] = v
	return true
}

// Get returns the value registered under name.
func (r *Registry[T]) Get(name string) (T, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	v, ok := r.m[name]
	return v, ok
}

// Names returns the registered names, sorted.
func (r *Registry[T]) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.m))
}

// All returns a copy of the registrations, to range over without the lock.
func (r *Registry[T]) All() iter.Seq2[string, T] {
	r.mu.RLock()
	cp := maps.Clone(r.m)
	r.mu.RUnlock()
	return maps.All(cp)
}
