package memdriver

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/agentry/agentry/memory"
)

var fieldPath = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// CheckName refuses an empty stream or collection name, or one longer
// than 200 bytes; what names it (kind: "stream", "collection", "key")
// appears in the error.
func CheckName(kind, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: the %s is empty", memory.ErrInvalid, kind)
	case len(name) > 200:
		return fmt.Errorf("%w: the %s %.40q… is longer than 200 bytes", memory.ErrInvalid, kind, name)
	}
	return nil
}

// CheckQuery refuses what a backend could not run the same way as the
// others: a field that is not a name or dotted path, an unknown
// operator, a value that is not a string, number or bool, a range on a
// bool, a negative limit.
func CheckQuery(q memory.Query) error {
	for i, f := range q.Where {
		if !fieldPath.MatchString(f.Field) {
			return fmt.Errorf("%w: where[%d].field %q: want a field name or a dotted path (address.city)", memory.ErrInvalid, i, f.Field)
		}
		switch f.Op {
		case memory.Eq, memory.Ne, memory.Lt, memory.Lte, memory.Gt, memory.Gte:
		default:
			return fmt.Errorf("%w: where[%d].op %q: want one of = != < <= > >=", memory.ErrInvalid, i, f.Op)
		}
		switch v := f.Value.(type) {
		case string, float64, int, int64:
		case bool:
			if f.Op != memory.Eq && f.Op != memory.Ne {
				return fmt.Errorf("%w: where[%d]: %s compares numbers or strings, not %v", memory.ErrInvalid, i, f.Op, v)
			}
		default:
			return fmt.Errorf("%w: where[%d].value: want a string, number or bool, got %T", memory.ErrInvalid, i, f.Value)
		}
	}
	if q.OrderBy != "" && !fieldPath.MatchString(q.OrderBy) {
		return fmt.Errorf("%w: order_by %q: want a field name or a dotted path", memory.ErrInvalid, q.OrderBy)
	}
	if q.Limit < 0 {
		return fmt.Errorf("%w: limit %d is negative", memory.ErrInvalid, q.Limit)
	}
	return nil
}

// Path splits a field path into its names.
func Path(field string) []string { return strings.Split(field, ".") }

// Lookup returns the value at a field path of v, and whether there is one.
func Lookup(v map[string]any, field string) (any, bool) {
	var cur any = v
	for _, name := range Path(field) {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[name]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// Number returns a filter's value as a float64 when it is a number
// (float64, int or int64), as backends compare it.
func Number(v any) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, true
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	}
	return 0, false
}

// compare compares a and b when they are of one type (numbers, strings
// or bools; bools only for equality): ok is false otherwise.
func compare(a, b any) (c int, ok bool) {
	if x, ok := Number(a); ok {
		y, ok := Number(b)
		return cmp.Compare(x, y), ok
	}
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return strings.Compare(x, y), ok
	case bool:
		y, ok := b.(bool)
		if !ok {
			return 0, false
		}
		if x == y {
			return 0, true
		}
		return 1, true
	}
	return 0, false
}

// Matches reports whether the document value v passes the filter f: the
// field exists, is of the filter value's type, and compares as f says.
func Matches(v map[string]any, f memory.Filter) bool {
	got, ok := Lookup(v, f.Field)
	if !ok {
		return false
	}
	c, ok := compare(got, f.Value)
	if !ok {
		return false
	}
	switch f.Op {
	case memory.Eq:
		return c == 0
	case memory.Ne:
		return c != 0
	case memory.Lt:
		return c < 0
	case memory.Lte:
		return c <= 0
	case memory.Gt:
		return c > 0
	case memory.Gte:
		return c >= 0
	}
	return false
}

// Select runs q over docs in the process, as the backends without a
// query engine do: the documents every filter matches, ordered and cut.
// Documents without the OrderBy field come last, by key.
func Select(docs []memory.Doc, q memory.Query) ([]memory.Doc, error) {
	if err := CheckQuery(q); err != nil {
		return nil, err
	}
	var out []memory.Doc
	for _, d := range docs {
		if !slices.ContainsFunc(q.Where, func(f memory.Filter) bool { return !Matches(d.Value, f) }) {
			out = append(out, d)
		}
	}
	slices.SortStableFunc(out, func(a, b memory.Doc) int {
		c := 0
		if q.OrderBy != "" {
			x, okx := Lookup(a.Value, q.OrderBy)
			y, oky := Lookup(b.Value, q.OrderBy)
			switch {
			case okx && !oky:
				return -1
			case !okx && oky:
				return 1
			case okx && oky:
				c, _ = compare(x, y)
			}
		}
		c = cmp.Or(c, strings.Compare(a.Key, b.Key))
		if q.Desc {
			return -c
		}
		return c
	})
	return out[:min(len(out), limitOr(q.Limit, 100))], nil
}
