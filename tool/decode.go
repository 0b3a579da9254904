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
// set through reflect.Value's typed setters (no unsafe). It runs only
// on arguments the schema has accepted, so every key is a known field and
// every value has the field's JSON type.
type flatDecoder struct {
	fields []flatField // in the order of node.fields
}

type flatField struct {
	index int // in the struct
	kind  reflect.Kind
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// newFlatDecoder returns a decoder for t, or nil when t is not a flat
// struct of scalars that decode the standard way.
func newFlatDecoder(t reflect.Type, n *node) *flatDecoder {
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
		_, opts, _ := strings.Cut(tag, ",")
		if sf.Anonymous || strings.Contains(","+opts+",", ",string,") || customDecoding(sf.Type) {
			return nil
		}
		switch sf.Type.Kind() {
		case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		default:
			return nil
		}
		d.fields = append(d.fields, flatField{index: i, kind: sf.Type.Kind()})
	}
	if len(d.fields) != len(n.fields) {
		return nil
	}
	return d
}

func customDecoding(t reflect.Type) bool {
	return t.Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(jsonUnmarshaler) ||
		t.Implements(textUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler)
}

// decode fills the struct v (addressable) from data, an object n has
// validated.
func (d *flatDecoder) decode(n *node, data []byte, v reflect.Value) error {
	i := skipWS(data, 0) + 1
	for i = skipWS(data, i); data[i] != '}'; {
		kEnd := skipString(data, i)
		idx := n.fieldIndex(data[i+1 : kEnd-1])
		i = skipWS(data, skipWS(data, kEnd)+1)
		end := skipValue(data, i)
		if data[i] != 'n' { // null leaves the zero value, as encoding/json does
			if err := d.fields[idx].set(v.Field(d.fields[idx].index), data[i:end]); err != nil {
				return fmt.Errorf("%s: %w", n.fields[idx].name, err)
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
		fv.SetBool(v[0] == 't')
	case reflect.Float32, reflect.Float64:
		x, err := strconv.ParseFloat(string(v), fv.Type().Bits())
		if err != nil {
			return fmt.Errorf("cannot hold %s", v)
		}
		fv.SetFloat(x)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		x, err := strconv.ParseInt(string(v), 10, intBits(f.kind))
		if err != nil {
			return fmt.Errorf("cannot hold %s", v)
		}
		fv.SetInt(x)
	default:
		x, err := strconv.ParseUint(string(v), 10, intBits(f.kind))
		if err != nil {
			return fmt.Errorf("cannot hold %s", v)
		}
		fv.SetUint(x)
	}
	return nil
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
