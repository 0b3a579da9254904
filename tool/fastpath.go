package tool

import (
	"bytes"
	"math"
	"reflect"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
)

// The fast path: a schema that uses only the keywords below is compiled
// into a node tree, and arguments are checked against it in one pass over
// their bytes, without decoding them and without allocating. It answers
// only "valid" or "ask the full validator": anything it rejects or cannot
// decide (a number whose exponent is too long, say) goes to package
// schema, which decides and words the problems. FuzzFastPath holds it to
// the full validator's answers.

// typeSet is a set of JSON types; the empty set allows every type.
type typeSet uint8

const (
	tNull typeSet = 1 << iota
	tBoolean
	tObject
	tArray
	tNumber
	tInteger
	tString
)

var typeNames = map[string]typeSet{"null": tNull, "boolean": tBoolean, "object": tObject,
	"array": tArray, "number": tNumber, "integer": tInteger, "string": tString}

type node struct {
	types    typeSet
	never    bool     // the false schema
	enum     []string // nil: no enum; only enums of strings are compiled
	min, max *int64
	props    []prop
	required uint64 // a bit per prop
	noExtra  bool   // additionalProperties: false
	extra    *node  // additionalProperties' schema; nil allows anything
	items    *node  // nil allows anything
}

type prop struct {
	name string
	node *node
}

// maxExact is the largest integer bound compared exactly here: every
// integer up to it is a float64, so the schema's bound is the one written.
const maxExact = 1 << 53

// compileNode returns the node tree of s, or nil when s uses a keyword the
// fast path does not implement.
func compileNode(s *jsonschema.Schema, top bool) *node {
	if s == nil {
		return &node{}
	}
	if isFalse(s) {
		return &node{never: true}
	}
	if !onlyKnownKeywords(s, top) {
		return nil
	}
	n := &node{}
	for _, t := range append([]string{s.Type}, s.Types...) {
		if t == "" {
			continue
		}
		ts, ok := typeNames[t]
		if !ok {
			return nil
		}
		n.types |= ts
	}
	if s.Enum != nil {
		n.enum = make([]string, 0, len(s.Enum))
		for _, e := range s.Enum {
			str, ok := e.(string)
			if !ok {
				return nil
			}
			n.enum = append(n.enum, str)
		}
	}
	var ok bool
	if n.min, ok = exactBound(s.Minimum); !ok {
		return nil
	}
	if n.max, ok = exactBound(s.Maximum); !ok {
		return nil
	}
	if !n.compileObject(s) {
		return nil
	}
	if s.Items != nil {
		if n.items = compileNode(s.Items, false); n.items == nil {
			return nil
		}
	}
	return n
}

func (n *node) compileObject(s *jsonschema.Schema) bool {
	if len(s.Properties) > 64 {
		return false
	}
	for _, name := range propertyNames(s) {
		c := compileNode(s.Properties[name], false)
		if c == nil {
			return false
		}
		n.props = append(n.props, prop{name: name, node: c})
	}
	for _, r := range s.Required {
		i := n.propIndex(r)
		if i < 0 {
			return false // required but undeclared: rare, left to the full validator
		}
		n.required |= 1 << i
	}
	switch ap := s.AdditionalProperties; {
	case ap == nil:
	case isFalse(ap):
		n.noExtra = true
	default:
		if n.extra = compileNode(ap, false); n.extra == nil {
			return false
		}
	}
	return true
}

// propertyNames lists s's properties in their rendering order.
func propertyNames(s *jsonschema.Schema) []string {
	names := make([]string, 0, len(s.Properties))
	for _, p := range s.PropertyOrder {
		if _, ok := s.Properties[p]; ok {
			names = append(names, p)
		}
	}
	for p := range s.Properties {
		if !slices.Contains(names, p) {
			names = append(names, p)
		}
	}
	return names
}

func exactBound(b *float64) (*int64, bool) {
	if b == nil {
		return nil, true
	}
	if *b != math.Trunc(*b) || math.Abs(*b) > maxExact {
		return nil, false
	}
	v := int64(*b)
	return &v, true
}

// isFalse reports whether s is the schema false, which the library
// represents as {"not": {}}.
func isFalse(s *jsonschema.Schema) bool {
	if s.Not == nil || !reflect.ValueOf(*s.Not).IsZero() {
		return false
	}
	v := reflect.ValueOf(*s)
	for i := range v.NumField() {
		if v.Type().Field(i).Name != "Not" && !v.Field(i).IsZero() {
			return false
		}
	}
	return true
}

// compiledKeywords are the Schema fields the node tree implements, or that
// are annotations the validator does not assert.
var compiledKeywords = map[string]bool{
	"Type": true, "Types": true, "Enum": true, "Minimum": true, "Maximum": true,
	"Properties": true, "Required": true, "AdditionalProperties": true, "Items": true,
	"PropertyOrder": true, "Title": true, "Description": true, "Comment": true, "Default": true,
	"Deprecated": true, "ReadOnly": true, "WriteOnly": true, "Examples": true,
	"ContentEncoding": true, "ContentMediaType": true,
}

func onlyKnownKeywords(s *jsonschema.Schema, top bool) bool {
	v := reflect.ValueOf(*s)
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if compiledKeywords[f.Name] || v.Field(i).IsZero() {
			continue
		}
		if f.Name == "Schema" && top && (s.Schema == draft2020 || s.Schema == draft2020+"#") {
			continue
		}
		return false
	}
	return true
}

func (n *node) propIndex(name string) int {
	for i, p := range n.props {
		if p.name == name {
			return i
		}
	}
	return -1
}

// verdict is the fast path's answer about a value.
type verdict uint8

const (
	valid     verdict = iota
	invalid           // the full validator rejects it too
	undecided         // only the full validator can tell
)

// accepts reports whether data (valid JSON) is valid for sure; false means
// it is not, or that the full validator must decide.
func (n *node) accepts(data []byte) bool {
	_, v := n.check(data, skipWS(data, 0))
	return v == valid
}

// check checks the value at data[i] and returns the index after it; a
// verdict other than valid stops the walk.
func (n *node) check(data []byte, i int) (int, verdict) {
	if n.never {
		return 0, invalid
	}
	end := skipValue(data, i)
	var t typeSet
	switch c := data[i]; {
	case c == 'n':
		t = tNull
	case c == 't' || c == 'f':
		t = tBoolean
	case c == '"':
		t = tString
	case c == '{':
		t = tObject
	case c == '[':
		t = tArray
	default:
		t = tNumber
		if v := n.checkNumber(data[i:end]); v != valid {
			return 0, v
		}
		if n.types&tInteger != 0 {
			t |= tInteger // checkNumber has checked that it is one when it must be
		}
	}
	if n.types != 0 && n.types&t == 0 || n.enum != nil && (t != tString || !n.inEnum(data[i:end])) {
		return 0, invalid
	}
	switch t {
	case tObject:
		return n.checkObject(data, i)
	case tArray:
		return n.checkArray(data, i)
	}
	return end, valid
}

func (n *node) checkNumber(tok []byte) verdict {
	if n.types&tInteger != 0 && n.types&tNumber == 0 {
		switch yes, decided := integral(tok); {
		case !decided:
			return undecided
		case !yes:
			return invalid
		}
	}
	if n.min == nil && n.max == nil {
		return valid
	}
	// Bounds are compared exactly on integers; a bounded "number" that is
	// not one is left to the full validator.
	var buf [maxCanonicalDigits + 1]byte
	c, ok := canonicalInt(buf[:0], tok)
	if !ok {
		return undecided
	}
	v, err := strconv.ParseInt(string(c), 10, 64)
	if err != nil { // beyond int64, so beyond every bound, which are at most 2⁵³
		if c[0] == '-' && n.min != nil || c[0] != '-' && n.max != nil {
			return invalid
		}
		return valid
	}
	if n.min != nil && v < *n.min || n.max != nil && v > *n.max {
		return invalid
	}
	return valid
}

func (n *node) checkArray(data []byte, i int) (int, verdict) {
	i = skipWS(data, i+1)
	for data[i] != ']' {
		v := valid
		if n.items == nil {
			i = skipValue(data, i)
		} else if i, v = n.items.check(data, i); v != valid {
			return 0, v
		}
		if i = skipWS(data, i); data[i] == ',' {
			i = skipWS(data, i+1)
		}
	}
	return i + 1, valid
}

func (n *node) checkObject(data []byte, i int) (int, verdict) {
	var seen uint64
	i = skipWS(data, i+1)
	for data[i] != '}' {
		kEnd := skipString(data, i)
		key := data[i+1 : kEnd-1]
		i = skipWS(data, skipWS(data, kEnd)+1) // past ':'
		vn := n.extra
		if idx := n.keyIndex(key); idx >= 0 {
			seen |= 1 << idx
			vn = n.props[idx].node
		} else if n.noExtra {
			return 0, invalid
		}
		v := valid
		if vn == nil {
			i = skipValue(data, i)
		} else if i, v = vn.check(data, i); v != valid {
			return 0, v
		}
		if i = skipWS(data, i); data[i] == ',' {
			i = skipWS(data, i+1)
		}
	}
	if seen&n.required != n.required {
		return 0, invalid
	}
	return i + 1, valid
}

// keyIndex finds the property a key names; the key is compared as the
// decoder would see it (escapes resolved, bad UTF-8 replaced).
func (n *node) keyIndex(key []byte) int {
	if len(n.props) == 0 {
		return -1
	}
	k := string(key) // no allocation: used only for comparison
	if needsUnquote(key) {
		k = unquote(key)
	}
	return n.propIndex(k)
}

func (n *node) inEnum(quoted []byte) bool {
	v := quoted[1 : len(quoted)-1]
	s := string(v)
	if needsUnquote(v) {
		s = unquote(v)
	}
	return slices.Contains(n.enum, s)
}

func needsUnquote(s []byte) bool {
	return bytes.IndexByte(s, '\\') >= 0 || !utf8.Valid(s)
}
