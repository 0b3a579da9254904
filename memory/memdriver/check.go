// Package memdriver is what a memory backend is built with, as
// database/sql/driver is for SQL drivers: the checks every backend makes
// on what it is given, the stamping of entries (ids, times, expiry, and
// the sealed text bound to an id), and the reading, selection and
// ranking a backend that cannot do them itself runs in the process. A
// backend built with it behaves as the others do (memory/memorytest
// checks it); a user of memory never needs it.
package memdriver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentry/agentry/memory"
)

// CheckEntry refuses an entry a backend must not store: no stream, no
// text, a negative retention.
func CheckEntry(e memory.Entry, keep memory.Retention) error {
	if err := CheckName("stream", e.Stream); err != nil {
		return err
	}
	if e.Text == "" {
		return fmt.Errorf("%w: the entry for %s has no text", memory.ErrInvalid, e.Stream)
	}
	if keep.MaxEntries < 0 || keep.TTL < 0 {
		return fmt.Errorf("%w: retention max_entries %d, ttl %s: neither may be negative", memory.ErrInvalid, keep.MaxEntries, keep.TTL)
	}
	return nil
}

type sealKey struct{}

// WithSeal returns ctx for an Append whose entry's text is sealed, bound
// to the entry's id: seal(id) is the text to store once the backend
// knows the id (Stamp, TextFor). A wrapper that encrypts what reaches a
// backend gives it.
func WithSeal(ctx context.Context, seal func(id int64) string) context.Context {
	return context.WithValue(ctx, sealKey{}, seal)
}

func sealOf(ctx context.Context) func(id int64) string {
	seal, _ := ctx.Value(sealKey{}).(func(id int64) string)
	return seal
}

// Stamp gives an entry being appended (with ctx, the Append's) its id,
// time and expiry, and the text to store: a sealed entry's text is bound
// to its id (WithSeal), so a backend that knows the id first calls Stamp
// with it; one that learns it on insert calls Stamp with 0, then
// TextFor. Times are kept to the microsecond, as every backend stores
// them.
func Stamp(ctx context.Context, e memory.Entry, keep memory.Retention, id int64, now time.Time) memory.Entry {
	e.ID = id
	if seal := sealOf(ctx); seal != nil && id != 0 {
		e.Text = seal(id)
	}
	e.Time = now.UTC().Truncate(time.Microsecond)
	e.Expires = time.Time{}
	if keep.TTL > 0 {
		e.Expires = e.Time.Add(keep.TTL)
	}
	return e
}

// TextFor is the text a backend stores for e once its id is known, for
// a backend that learns the id only when it inserts (a SQL sequence):
// it must then rewrite the entry's text with it, in the same
// transaction. ok is false when the text does not depend on the id.
func TextFor(ctx context.Context, e memory.Entry, id int64) (text string, ok bool) {
	seal := sealOf(ctx)
	if seal == nil {
		return e.Text, false
	}
	return seal(id), true
}

// Expired reports whether e is forgotten at now.
func Expired(e memory.Entry, now time.Time) bool {
	return !e.Expires.IsZero() && !now.Before(e.Expires)
}

// CheckRead refuses a read of no stream or with a negative limit.
func CheckRead(stream string, o memory.ReadOptions) error {
	if err := CheckName("stream", stream); err != nil {
		return err
	}
	if o.Limit < 0 {
		return fmt.Errorf("%w: limit %d is negative", memory.ErrInvalid, o.Limit)
	}
	if o.Order != memory.Oldest && o.Order != memory.Newest {
		return fmt.Errorf("%w: unknown order %d", memory.ErrInvalid, o.Order)
	}
	return nil
}

// ReadEntries applies o to a stream's entries (oldest first) in the
// process, leaving out those expired at now.
func ReadEntries(entries []memory.Entry, o memory.ReadOptions, now time.Time) []memory.Entry {
	out := make([]memory.Entry, 0, len(entries))
	for _, e := range entries {
		if Expired(e, now) || !o.Since.IsZero() && e.Time.Before(o.Since) || !o.Until.IsZero() && !e.Time.Before(o.Until) {
			continue
		}
		out = append(out, e)
	}
	if o.Order == memory.Newest {
		slices.Reverse(out)
	}
	if o.Limit > 0 && len(out) > o.Limit {
		out = out[:o.Limit]
	}
	return out
}

// CheckDoc refuses a document a backend must not store (no collection or
// key, no value) and returns it with its value as JSON reads it back
// (numbers float64), so that every backend returns the same value.
func CheckDoc(d memory.Doc) (memory.Doc, error) {
	if err := errors.Join(CheckName("collection", d.Collection), CheckName("key", d.Key)); err != nil {
		return d, err
	}
	if d.Value == nil {
		return d, fmt.Errorf("%w: the document %s/%s has no value", memory.ErrInvalid, d.Collection, d.Key)
	}
	data, err := json.Marshal(d.Value)
	if err != nil {
		return d, fmt.Errorf("%w: the value of %s/%s is not JSON: %v", memory.ErrInvalid, d.Collection, d.Key, err)
	}
	d.Value = nil
	if err := json.Unmarshal(data, &d.Value); err != nil {
		return d, fmt.Errorf("%w: the value of %s/%s: %v", memory.ErrInvalid, d.Collection, d.Key, err)
	}
	return d, nil
}

func mustJSON(v any) []byte {
	data, _ := json.Marshal(v) // values come from JSON
	return data
}
