package tool

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// flatDecoder decodes arguments into a struct whose fields are all
// scalars (strings, booleans, integers, floats), the common shape of tool
// inputs, without encoding/json's reflection and allocations. Offsets and
// kinds are taken from reflect once, when the tool is made, and fields are
// set through reflect.Value's typed setters (no unsafe). It decodes as
// encoding/json does (FuzzFlatDecoder compares them): unknown keys are
// skipped, a key matches a field case-insensitively when none matches
// exactly, null leaves a field alone, and the last of duplicate keys wins;
// it also takes an integer written as 1.0 or 1e2, which the schema allows.
type flatDecoder struct {
	fields []flatField
}

type flatField struct {
	name  string // the JSON name
	index int    // in the struct
	kind  reflect.Kind
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// newFlatDecoder returns a decoder for t, or nil when t is not a flat
// struct of scalars that decode the standard way.
func newFlatDecoder(t reflect.Type) *flatDecoder {
	if t.Kind() != reflect.Struct || customDecoding(t) {
		return nil
	}
	d := &flatDecoder{}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" || !sf.IsExported() && !sf.Anonymous {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = sf.Name
		}
		if sf.Anonymous || strings.Contains(","+opts+",", ",string,") || customDecoding(sf.Type) {
			return nil
		}
		switch sf.Type.Kind() {
		case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		default:
			return nil
		}
		if d.field(name) >= 0 {
			return nil // two fields of one name: encoding/json's rules apply
		}
		d.fields = append(d.fields, flatField{name: name, index: i, kind: sf.Type.Kind()})
	}
	return d
}

func customDecoding(t reflect.Type) bool {
	return t.Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(jsonUnmarshaler) ||
		t.Implements(textUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler)
}

func (d *flatDecoder) field(name string) int {
	for i, f := range d.fields {
		if f.name == name {
			return i
		}
	}
	return -1
}

// lookup finds the field a key names, as encoding/json does.
func (d *flatDecoder) lookup(key []byte) int {
	k := string(key) // no allocation: used only for comparison
	if needsUnquote(key) {
		k = unquote(key)
	}
	if i := d.field(k); i >= 0 {
		return i
	}
	for i, f := range d.fields {
		if strings.EqualFold(f.name, k) {
			return i
		}
	}
	return -1
}

// decode fills the struct v (addressable) from data, a JSON object.
func (d *flatDecoder) decode(data []byte, v reflect.Value) error {
	i := skipWS(data, 0)
	if data[i] == 'n' {
		return nil
	}
	if data[i] != '{' {
		return fmt.Errorf("cannot hold %s", typeOf(data[i]))
	}
	for i = skipWS(data, i+1); data[i] != '}'; {
		kEnd := skipString(data, i)
		idx := d.lookup(data[i+1 : kEnd-1])
		i = skipWS(data, skipWS(data, kEnd)+1)
		end := skipValue(data, i)
		if idx >= 0 && data[i] != 'n' { // null leaves the field alone, as encoding/json does
			if err := d.fields[idx].set(v.Field(d.fields[idx].index), data[i:end]); err != nil {
				return fmt.Errorf("%s: %w", d.fields[idx].name, err)
			}
		}
		i = skipWS(data, end)
		if data[i] == ',' {
			i = skipWS(data, i+1)
		}
	}
	return nil
}

func (f flatField) set(fv reflect.Value, v []byte) error {
	switch f.kind {
	case reflect.String:
		if v[0] != '"' {
			return fmt.Errorf("cannot hold %s", typeOf(v[0]))
		}
		s := v[1 : len(v)-1]
		if bytes.IndexByte(s, '\\') < 0 && utf8.Valid(s) {
			fv.SetString(string(s))
			return nil
		}
		var str string
		if err := json.Unmarshal(v, &str); err != nil {
			return err
		}
		fv.SetString(str)
	case reflect.Bool:
		if v[0] != 't' && v[0] != 'f' {
			return fmt.Errorf("cannot hold %s", typeOf(v[0]))
		}
		fv.SetBool(v[0] == 't')
	case reflect.Float32, reflect.Float64:
		x, err := strconv.ParseFloat(string(v), fv.Type().Bits())
		if err != nil {
			return fmt.Errorf("cannot hold %s", v)
		}
		fv.SetFloat(x)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v = integerText(v)
		x, err := strconv.ParseInt(string(v), 10, intBits(f.kind))
		if err != nil {
			return fmt.Errorf("cannot hold %s", v)
		}
		fv.SetInt(x)
	default:
		v = integerText(v)
		x, err := strconv.ParseUint(string(v), 10, intBits(f.kind))
		if err != nil {
			return fmt.Errorf("cannot hold %s", v)
		}
		fv.SetUint(x)
	}
	return nil
}

// integerText returns an integer written as 1.0 or 1e2 as an integer
// literal, and anything else as it is.
func integerText(v []byte) []byte {
	if isPlainInteger(v) || v[0] != '-' && (v[0] < '0' || v[0] > '9') {
		return v
	}
	if c, ok := canonicalInt(nil, v); ok {
		return c
	}
	return v
}

func intBits(k reflect.Kind) int {
	switch k {
	case reflect.Int8, reflect.Uint8:
		return 8
	case reflect.Int16, reflect.Uint16:
		return 16
	case reflect.Int32, reflect.Uint32:
		return 32
	case reflect.Int, reflect.Uint:
		return strconv.IntSize
	}
	return 64
}
