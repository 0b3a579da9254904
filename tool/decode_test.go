package tool

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
)

type flat struct {
	S   string  `json:"s"`
	B   bool    `json:"b,omitempty"`
	I   int     `json:"i,omitempty"`
	I8  int8    `json:"i8,omitempty"`
	I16 int16   `json:"i16,omitempty"`
	I32 int32   `json:"i32,omitempty"`
	I64 int64   `json:"i64,omitempty"`
	U   uint    `json:"u,omitempty"`
	U8  uint8   `json:"u8,omitempty"`
	U16 uint16  `json:"u16,omitempty"`
	U32 uint32  `json:"u32,omitempty"`
	U64 uint64  `json:"u64,omitempty"`
	F32 float32 `json:"f32,omitempty"`
	F64 float64 `json:"f64,omitempty"`
}

var flatCases = []string{
	`{"s": "plain"}`,
	`{"s": "esc\"aped\n\u00e9", "b": true, "i": -42, "i8": -128, "i16": 32767, "i32": -5, "i64": 9007199254740993}`,
	`{"s": "", "u": 7, "u8": 255, "u16": 65535, "u32": 4294967295, "u64": 18446744073709551615, "f32": 1.5e3, "f64": -0.25}`,
	`{"s": "dup", "s": "last wins", "b": false}`,
	`{"s": null, "i": null}`,
	"{\"s\": \"bad utf8 \xff\"}",
	`{"i8": 128, "s": "x"}`,
	`{"u8": -1, "s": "x"}`,
	`{"i": 1e2, "s": "x", "u16": 6.5536e4, "i64": -9.223372036854775808e18}`,
	`{"i": 1.5, "s": "x"}`,
	`{"S": "upper", "I": 3}`,
	`{"s": 5}`,
	`{"s": "x", "b": 1}`,
	`[1]`,
}

// decodeBoth decodes args with the flat decoder and with encoding/json,
// which is given integers written as integers, and compares them.
func decodeBoth(t testing.TB, d *flatDecoder, args string) {
	var want, got flat
	canonical, _ := canonicalInts([]byte(args))
	wantErr := json.Unmarshal(canonical, &want)
	gotErr := d.decode([]byte(args), reflect.ValueOf(&got).Elem())
	if (wantErr != nil) != (gotErr != nil) {
		t.Fatalf("%s: encoding/json err %v, flat decoder err %v", args, wantErr, gotErr)
	}
	if wantErr == nil && !reflect.DeepEqual(want, got) {
		t.Fatalf("%s:\nencoding/json %+v\nflat decoder  %+v", args, want, got)
	}
}

func TestFlatDecoderMatchesEncodingJSON(t *testing.T) {
	d := newFlatDecoder(reflect.TypeFor[flat]())
	if d == nil {
		t.Fatal("flat struct not recognised")
	}
	for _, c := range flatCases {
		t.Run(c, func(t *testing.T) { decodeBoth(t, d, c) })
	}
	if newFlatDecoder(reflect.TypeFor[sample]()) != nil {
		t.Error("a struct with nested fields got the flat decoder")
	}
}

// FuzzFlatDecoder decodes any JSON both ways: the flat decoder must agree
// with encoding/json on what it accepts and what it produces.
func FuzzFlatDecoder(f *testing.F) {
	for _, c := range flatCases {
		f.Add(c)
	}
	d := newFlatDecoder(reflect.TypeFor[flat]())
	f.Fuzz(func(t *testing.T, args string) {
		if !json.Valid([]byte(args)) {
			return
		}
		decodeBoth(t, d, args)
	})
}

// FuzzCall feeds any bytes to a tool with a nested schema: the tool must
// answer with output or an error, never panic.
func FuzzCall(f *testing.F) {
	for _, c := range argCases {
		f.Add(c.args)
	}
	f.Add(`{"query": "x", "owner": {"name": "n", "level": 3}}`)
	f.Add(`{"query`)
	tl := Must(Func("s", "", func(_ context.Context, in sample) (string, error) { return in.Query, nil }))
	f.Fuzz(func(t *testing.T, args string) {
		out, err := tl.Call(context.Background(), json.RawMessage(args))
		if err == nil && !json.Valid(out) {
			t.Fatalf("%s: output %s is not JSON", args, out)
		}
	})
}
