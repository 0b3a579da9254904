// Package syncbuf is a text buffer that one goroutine writes and another
// reads: a child process's output, a logger's records, in tests.
package syncbuf

import (
	"strings"
	"sync"
)

// Buffer is a strings.Builder behind a lock.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String is what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
