// Package kv is an in-process key-value store and the agent tools over it:
// kv_get, kv_set, kv_delete and kv_list.
package kv

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"

	"github.com/agentry/agentry/tool"
)

// Store is an in-memory key-value store of JSON values, safe for
// concurrent use.
type Store struct {
	mu sync.RWMutex
	m  map[string]json.RawMessage
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{m: map[string]json.RawMessage{}} }

// Get returns the value of key.
func (s *Store) Get(key string) (json.RawMessage, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, ok := s.m[key]
	return v, ok
}

// Set stores value under key.
func (s *Store) Set(key string, value json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[key] = value
}

// Delete removes key and reports whether it was there.
func (s *Store) Delete(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[key]
	delete(s.m, key)
	return ok
}

// Keys returns the keys that start with prefix, sorted.
func (s *Store) Keys(prefix string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	keys := []string{}
	for k := range s.m {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

type keyArgs struct {
	Key string `json:"key" jsonschema:"The key."`
}

type setArgs struct {
	Key   string          `json:"key" jsonschema:"The key."`
	Value json.RawMessage `json:"value" jsonschema:"Any JSON value to store."`
}

type listArgs struct {
	Prefix string `json:"prefix,omitempty" jsonschema:"Only keys that start with this prefix."`
}

// GetResult is what kv_get returns.
type GetResult struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// SetResult is what kv_set returns.
type SetResult struct {
	Key    string `json:"key"`
	Stored bool   `json:"stored"`
}

// DeleteResult is what kv_delete returns.
type DeleteResult struct {
	Key     string `json:"key"`
	Deleted bool   `json:"deleted"`
}

// ListResult is what kv_list returns.
type ListResult struct {
	Keys []string `json:"keys"`
}

// Tools returns kv_get (safe), kv_set (idempotent), kv_delete (idempotent)
// and kv_list (safe) over s. A missing key is a not_found error the model
// can react to.
func Tools(s *Store) []tool.Tool {
	get := tool.Must(tool.Func("kv_get", "Read the JSON value stored under a key.",
		func(_ context.Context, a keyArgs) (GetResult, error) {
			v, ok := s.Get(a.Key)
			if !ok {
				return GetResult{}, tool.NotFound("key", a.Key)
			}
			return GetResult{Key: a.Key, Value: v}, nil
		}, tool.WithIdempotency(tool.Safe)))
	set := tool.Must(tool.Func("kv_set", "Store a JSON value under a key, replacing any previous value.",
		func(_ context.Context, a setArgs) (SetResult, error) {
			v := a.Value
			if len(v) == 0 {
				v = json.RawMessage("null")
			}
			s.Set(a.Key, slices.Clone(v))
			return SetResult{Key: a.Key, Stored: true}, nil
		}, tool.WithIdempotency(tool.Idempotent)))
	del := tool.Must(tool.Func("kv_delete", "Delete a key.",
		func(_ context.Context, a keyArgs) (DeleteResult, error) {
			return DeleteResult{Key: a.Key, Deleted: s.Delete(a.Key)}, nil
		}, tool.WithIdempotency(tool.Idempotent)))
	list := tool.Must(tool.Func("kv_list", "List the stored keys, sorted, optionally only those with a prefix.",
		func(_ context.Context, a listArgs) (ListResult, error) {
			return ListResult{Keys: s.Keys(a.Prefix)}, nil
		}, tool.WithIdempotency(tool.Safe)))
	return []tool.Tool{get, set, del, list}
}
