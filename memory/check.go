package memory

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// CheckEntry refuses an entry a backend must not store: no stream, no
// text, a negative retention.
func CheckEntry(e Entry, keep Retention) error {
	if err := CheckName("stream", e.Stream); err != nil {
		return err
	}
	if e.Text == "" {
		return fmt.Errorf("%w: the entry for %s has no text", ErrInvalid, e.Stream)
	}
	if keep.MaxEntries < 0 || keep.TTL < 0 {
		return fmt.Errorf("%w: retention max_entries %d, ttl %s: neither may be negative", ErrInvalid, keep.MaxEntries, keep.TTL)
	}
	return nil
}

// Stamp gives an entry being appended its id, time and expiry, and the
// text to store: a sealed entry's text is bound to its id, so a backend
// that knows the id first calls Stamp with it (one that learns it on
// insert calls TextFor after). Times are kept to the microsecond, as
// every backend stores them.
func Stamp(e Entry, keep Retention, id int64, now time.Time) Entry {
	e.ID = id
	if e.seal != nil && id != 0 {
		e.Text, e.seal = e.seal(id), nil
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
func TextFor(e Entry, id int64) (text string, ok bool) {
	if e.seal == nil {
		return e.Text, false
	}
	return e.seal(id), true
}

func expired(e Entry, now time.Time) bool { return !e.Expires.IsZero() && !now.Before(e.Expires) }

// CheckRead refuses a read of no stream or with a negative limit.
func CheckRead(stream string, o ReadOptions) error {
	if err := CheckName("stream", stream); err != nil {
		return err
	}
	if o.Limit < 0 {
		return fmt.Errorf("%w: limit %d is negative", ErrInvalid, o.Limit)
	}
	if o.Order != Oldest && o.Order != Newest {
		return fmt.Errorf("%w: unknown order %d", ErrInvalid, o.Order)
	}
	return nil
}

// ReadEntries applies o to a stream's entries (oldest first) in the
// process, leaving out those expired at now.
func ReadEntries(entries []Entry, o ReadOptions, now time.Time) []Entry {
	out := make([]Entry, 0, len(entries))
	for _, e := range entries {
		if expired(e, now) || !o.Since.IsZero() && e.Time.Before(o.Since) || !o.Until.IsZero() && !e.Time.Before(o.Until) {
			continue
		}
		out = append(out, e)
	}
	if o.Order == Newest {
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
func CheckDoc(d Doc) (Doc, error) {
	if err := errors.Join(CheckName("collection", d.Collection), CheckName("key", d.Key)); err != nil {
		return d, err
	}
	if d.Value == nil {
		return d, fmt.Errorf("%w: the document %s/%s has no value", ErrInvalid, d.Collection, d.Key)
	}
	data, err := json.Marshal(d.Value)
	if err != nil {
		return d, fmt.Errorf("%w: the value of %s/%s is not JSON: %v", ErrInvalid, d.Collection, d.Key, err)
	}
	d.Value = nil
	if err := json.Unmarshal(data, &d.Value); err != nil {
		return d, fmt.Errorf("%w: the value of %s/%s: %v", ErrInvalid, d.Collection, d.Key, err)
	}
	return d, nil
}

func mustJSON(v any) []byte {
	data, _ := json.Marshal(v) // values come from JSON
	return data
}
