// Package strictjson decodes configuration files strictly: an unknown field
// is an error that names its full path (and the nearest known name), a
// syntax error names its line and column, and a type error names the field.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// Decode decodes data into v (a pointer to a struct), refusing unknown
// fields and trailing data.
func Decode(data []byte, v any) error {
	if err := unknownFields(data, reflect.TypeOf(v)); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describe(data, err)
	}
	if dec.More() {
		return errors.New("unexpected data after the JSON object")
	}
	return nil
}

func describe(data []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := position(data, se.Offset-1) // Offset counts the bad byte
		return fmt.Errorf("invalid JSON at line %d, column %d: %v", line, col, se)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			return fmt.Errorf("expected %s, got JSON %s", typeName(te.Type), te.Value)
		}
		return fmt.Errorf("field %q: expected %s, got JSON %s", field, typeName(te.Type), te.Value)
	}
	if errors.Is(err, bytes.ErrTooLarge) {
		return err
	}
	if err.Error() == "EOF" {
		return errors.New("empty document")
	}
	return err
}

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Uint, reflect.Uint64:
		return "an integer"
	case reflect.Float64, reflect.Float32:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

func position(data []byte, off int64) (line, col int) {
	line, col = 1, 1
	for i := 0; i < int(off) && i < len(data); i++ {
		if data[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

// unknownFields walks data against t and reports every field that t
// does not declare, each with its path (joined, in the document's key
// order sorted).
func unknownFields(data []byte, t reflect.Type) error {
	var raw any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return describe(data, err)
	}
	return walk(raw, t, "")
}

func walk(v any, t reflect.Type, path string) error {
	var errs []error
	walkInto(v, t, path, &errs)
	return errors.Join(errs...)
}

func walkInto(v any, t reflect.Type, path string, errs *[]error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return // the decoder reports the type error
		}
		fields := Fields(t)
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			if ft, ok := fields[k]; ok {
				walkInto(obj[k], ft, join(path, k), errs)
			} else {
				*errs = append(*errs, unknown(join(path, k), k, fields))
			}
		}
	case reflect.Slice, reflect.Array:
		arr, _ := v.([]any)
		for i, e := range arr {
			walkInto(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), errs)
		}
	case reflect.Map:
		obj, _ := v.(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			walkInto(obj[k], t.Elem(), join(path, k), errs)
		}
	}
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// UnknownFieldError names a field the format does not have.
type UnknownFieldError struct {
	Path       string
	Suggestion string
}

func (e *UnknownFieldError) Error() string {
	if e.Suggestion != "" {
		return fmt.Sprintf("unknown field %q (did you mean %q?)", e.Path, e.Suggestion)
	}
	return fmt.Sprintf("unknown field %q", e.Path)
}

func unknown(path, key string, fields map[string]reflect.Type) error {
	best, bestD := "", 3
	for name := range fields {
		if d := distance(strings.ToLower(key), name); d < bestD || d == bestD && name < best {
			best, bestD = name, d
		}
	}
	return &UnknownFieldError{Path: path, Suggestion: best}
}

// Fields returns the JSON field names of struct type t with their types,
// following embedded structs.
func Fields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if sf.Anonymous && name == "" {
			et := sf.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				for k, v := range Fields(et) {
					out[k] = v
				}
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		ft := sf.Type
		if ft == reflect.TypeFor[json.RawMessage]() {
			ft = reflect.TypeFor[any]()
		}
		out[name] = ft
	}
	return out
}

// distance is the Levenshtein distance of a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
