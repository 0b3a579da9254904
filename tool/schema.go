package tool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// A schema is derived once per Func from its input type and compiled into
// a node tree; validation walks the argument bytes against the tree
// without reflection or allocation.

type kind uint8

const (
	kAny kind = iota
	kString
	kInteger
	kNumber
	kBoolean
	kArray
	kObject // a struct: known properties, no others
	kMap    // map[string]T
)

var kindJSON = [...]string{kAny: "", kString: "string", kInteger: "integer", kNumber: "number",
	kBoolean: "boolean", kArray: "array", kObject: "object", kMap: "object"}

type node struct {
	kind        kind
	nullable    bool
	description string
	format      string
	enum        []string
	fields      []field // kObject
	elem        *node   // kArray, kMap
}

type field struct {
	name     string
	required bool
	node     *node
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

// deriveSchema builds the node tree of t, which must be a struct (or a
// pointer to one): the arguments of a tool are always an object.
func deriveSchema(t reflect.Type) (*node, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("tool input type %s is not a struct (arguments are a JSON object)", t)
	}
	return derive(t, map[reflect.Type]bool{})
}

func derive(t reflect.Type, visiting map[reflect.Type]bool) (*node, error) {
	nullable := false
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
		nullable = true
	}
	n := &node{nullable: nullable}
	switch {
	case t == timeType:
		n.kind, n.format = kString, "date-time"
		return n, nil
	case t == rawType || t.Kind() == reflect.Interface:
		n.kind = kAny
		return n, nil
	}
	switch t.Kind() {
	case reflect.String:
		n.kind = kString
	case reflect.Bool:
		n.kind = kBoolean
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n.kind = kInteger
	case reflect.Float32, reflect.Float64:
		n.kind = kNumber
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Kind() == reflect.Slice {
			n.kind, n.format = kString, "byte"
			return n, nil
		}
		n.kind = kArray
		n.nullable = n.nullable || t.Kind() == reflect.Slice
		e, err := derive(t.Elem(), visiting)
		if err != nil {
			return nil, err
		}
		n.elem = e
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("map key type %s is not string", t.Key())
		}
		n.kind, n.nullable = kMap, true
		e, err := derive(t.Elem(), visiting)
		if err != nil {
			return nil, err
		}
		n.elem = e
	case reflect.Struct:
		if visiting[t] {
			return nil, fmt.Errorf("type %s is recursive", t)
		}
		visiting[t] = true
		defer delete(visiting, t)
		n.kind = kObject
		if err := deriveFields(t, n, visiting); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("type %s has no JSON schema", t)
	}
	return n, nil
}

func deriveFields(t reflect.Type, n *node, visiting map[reflect.Type]bool) error {
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if sf.Anonymous && name == "" {
			et := sf.Type
			for et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				if err := deriveFields(et, n, visiting); err != nil {
					return err
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
		fn, err := derive(sf.Type, visiting)
		if err != nil {
			return fmt.Errorf("field %s: %w", sf.Name, err)
		}
		fn.description = sf.Tag.Get("description")
		if e := sf.Tag.Get("enum"); e != "" {
			if fn.kind != kString {
				return fmt.Errorf("field %s: enum tag on a non-string field", sf.Name)
			}
			fn.enum = strings.Split(e, ",")
		}
		optional := strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")
		n.fields = append(n.fields, field{name: name, required: !optional, node: fn})
	}
	return nil
}

// schemaJSON renders the node tree as a JSON Schema (draft 2020-12).
func (n *node) schemaJSON() json.RawMessage {
	var b bytes.Buffer
	n.write(&b, true)
	return b.Bytes()
}

func (n *node) write(b *bytes.Buffer, top bool) {
	b.WriteByte('{')
	sep := func() {
		if b.Len() > 0 && b.Bytes()[b.Len()-1] != '{' {
			b.WriteByte(',')
		}
	}
	str := func(s string) { q, _ := json.Marshal(s); b.Write(q) }
	if top {
		b.WriteString(`"$schema":"https://json-schema.org/draft/2020-12/schema"`)
	}
	if t := kindJSON[n.kind]; t != "" {
		sep()
		if n.nullable && !top {
			b.WriteString(`"type":["` + t + `","null"]`)
		} else {
			b.WriteString(`"type":"` + t + `"`)
		}
	}
	if n.description != "" {
		sep()
		b.WriteString(`"description":`)
		str(n.description)
	}
	if n.format != "" {
		sep()
		b.WriteString(`"format":"` + n.format + `"`)
	}
	if len(n.enum) > 0 {
		sep()
		b.WriteString(`"enum":[`)
		for i, e := range n.enum {
			if i > 0 {
				b.WriteByte(',')
			}
			str(e)
		}
		b.WriteByte(']')
	}
	switch n.kind {
	case kArray:
		sep()
		b.WriteString(`"items":`)
		n.elem.write(b, false)
	case kMap:
		sep()
		b.WriteString(`"additionalProperties":`)
		n.elem.write(b, false)
	case kObject:
		sep()
		b.WriteString(`"properties":{`)
		var req []string
		for i, f := range n.fields {
			if i > 0 {
				b.WriteByte(',')
			}
			str(f.name)
			b.WriteByte(':')
			f.node.write(b, false)
			if f.required {
				req = append(req, f.name)
			}
		}
		b.WriteByte('}')
		if len(req) > 0 {
			b.WriteString(`,"required":[`)
			for i, r := range req {
				if i > 0 {
					b.WriteByte(',')
				}
				str(r)
			}
			b.WriteByte(']')
		}
		b.WriteString(`,"additionalProperties":false`)
	}
	b.WriteByte('}')
}

// validate checks data (valid JSON) against n and returns the problems,
// each naming the argument's path. A first pass only counts problems and
// allocates nothing; when it finds some, a second pass describes them.
func (n *node) validate(data []byte) []string {
	var quick report
	n.check(data, skipWS(data, 0), nil, &quick)
	if quick.count == 0 {
		return nil
	}
	full := report{detail: true}
	n.check(data, skipWS(data, 0), nil, &full)
	return full.probs
}

type report struct {
	detail bool
	count  int
	probs  []string
}

func (r *report) add(format string, a ...any) {
	r.count++
	if r.detail {
		r.probs = append(r.probs, fmt.Sprintf(format, a...))
	}
}

// loc is the path to a value, built only in the describing pass.
type loc struct {
	parent *loc
	key    []byte
	index  int
}

// child returns the location of a member, or nil in the counting pass.
func (r *report) child(parent *loc, key []byte, index int) *loc {
	if !r.detail {
		return nil
	}
	return &loc{parent: parent, key: key, index: index}
}

func (l *loc) String() string {
	if l == nil {
		return "arguments"
	}
	var parts []string
	for ; l != nil; l = l.parent {
		if l.key != nil {
			parts = append(parts, unquote(l.key))
		} else {
			parts = append(parts, "["+strconv.Itoa(l.index)+"]")
		}
	}
	var b strings.Builder
	for i := len(parts) - 1; i >= 0; i-- {
		if b.Len() > 0 && parts[i][0] != '[' {
			b.WriteByte('.')
		}
		b.WriteString(parts[i])
	}
	return b.String()
}

// check validates the value starting at data[i] and returns the index after it.
func (n *node) check(data []byte, i int, l *loc, r *report) int {
	c := data[i]
	if c == 'n' {
		if !n.nullable && n.kind != kAny {
			n.mismatch(l, "null", r)
		}
		return i + 4
	}
	var ok bool
	switch n.kind {
	case kAny:
		return skipValue(data, i)
	case kString:
		if ok = c == '"'; ok {
			end := skipString(data, i)
			if len(n.enum) > 0 && !n.inEnum(data[i:end]) {
				r.add("%s: %s is not one of %s", l, data[i:end], strings.Join(n.enum, ", "))
			}
			return end
		}
	case kInteger, kNumber:
		if ok = c == '-' || c >= '0' && c <= '9'; ok {
			end, integer := scanNumber(data, i)
			if n.kind == kInteger && !integer {
				r.add("%s: expected integer, got %s", l, data[i:end])
			}
			return end
		}
	case kBoolean:
		ok = c == 't' || c == 'f'
	case kArray:
		if ok = c == '['; ok {
			return n.checkArray(data, i, l, r)
		}
	case kObject, kMap:
		if ok = c == '{'; ok {
			return n.checkObject(data, i, l, r)
		}
	}
	if !ok {
		n.mismatch(l, typeOf(c), r)
	}
	return skipValue(data, i)
}

func (n *node) checkArray(data []byte, i int, l *loc, r *report) int {
	i = skipWS(data, i+1)
	for k := 0; data[i] != ']'; k++ {
		i = skipWS(data, n.elem.check(data, i, r.child(l, nil, k), r))
		if data[i] == ',' {
			i = skipWS(data, i+1)
		}
	}
	return i + 1
}

func (n *node) checkObject(data []byte, i int, l *loc, r *report) int {
	var seen uint64
	var seenMore []bool
	if len(n.fields) > 64 {
		seenMore = make([]bool, len(n.fields))
	}
	i = skipWS(data, i+1)
	for data[i] != '}' {
		kEnd := skipString(data, i)
		key := data[i+1 : kEnd-1]
		i = skipWS(data, skipWS(data, kEnd)+1) // past ':'
		fn := n.elem
		if n.kind == kObject {
			idx := n.fieldIndex(key)
			if idx < 0 {
				r.add("%s: unknown argument", r.child(l, key, 0))
				fn = anyNode
			} else {
				if idx < 64 {
					seen |= 1 << idx
				} else {
					seenMore[idx] = true
				}
				fn = n.fields[idx].node
			}
		}
		i = skipWS(data, fn.check(data, i, r.child(l, key, 0), r))
		if data[i] == ',' {
			i = skipWS(data, i+1)
		}
	}
	for idx, f := range n.fields {
		has := idx < 64 && seen&(1<<idx) != 0 || idx >= 64 && seenMore[idx]
		if f.required && !has {
			r.add("%s: required argument is missing", r.child(l, []byte(f.name), 0))
		}
	}
	return i + 1
}

var anyNode = &node{kind: kAny}

func (n *node) fieldIndex(key []byte) int {
	k := string(key) // no allocation: used only for comparison
	if bytes.IndexByte(key, '\\') >= 0 {
		k = unquote(key)
	}
	for i, f := range n.fields {
		if f.name == k {
			return i
		}
	}
	return -1
}

func (n *node) inEnum(quoted []byte) bool {
	v := quoted[1 : len(quoted)-1]
	s := string(v)
	if bytes.IndexByte(v, '\\') >= 0 {
		s = unquote(v)
	}
	for _, e := range n.enum {
		if e == s {
			return true
		}
	}
	return false
}

func (n *node) mismatch(l *loc, got string, r *report) {
	want := kindJSON[n.kind]
	if n.nullable {
		want += " or null"
	}
	r.add("%s: expected %s, got %s", l, want, got)
}

func typeOf(c byte) string {
	switch {
	case c == '"':
		return "string"
	case c == '{':
		return "object"
	case c == '[':
		return "array"
	case c == 't' || c == 'f':
		return "boolean"
	case c == 'n':
		return "null"
	}
	return "number"
}

// The scanners below assume valid JSON (checked with json.Valid first).

func skipWS(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

func skipString(data []byte, i int) int {
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

func scanNumber(data []byte, i int) (end int, integer bool) {
	integer = true
	for ; i < len(data); i++ {
		switch c := data[i]; {
		case c == '.' || c == 'e' || c == 'E':
			integer = false
		case c == '-' || c == '+' || c >= '0' && c <= '9':
		default:
			return i, integer
		}
	}
	return i, integer
}

func skipValue(data []byte, i int) int {
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for ; i < len(data); i++ {
			switch data[i] {
			case '"':
				i = skipString(data, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return i
	case 't', 'n':
		return i + 4
	case 'f':
		return i + 5
	}
	end, _ := scanNumber(data, i)
	return end
}

func unquote(raw []byte) string {
	var s string
	if err := json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &s); err != nil {
		return string(raw)
	}
	return s
}
