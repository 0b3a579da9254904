package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

type inner struct {
	Name  string `json:"name"`
	Level int    `json:"level,omitempty"`
}

// sample has a field of every kind the fast path takes.
type sample struct {
	Query  string            `json:"query" jsonschema:"What to look for."`
	Limit  int               `json:"limit,omitempty"`
	Small  int8              `json:"small,omitempty"`
	Count  uint              `json:"count,omitempty"`
	Ratio  float64           `json:"ratio,omitempty"`
	Mode   string            `json:"mode,omitempty"`
	Tags   []string          `json:"tags,omitempty"`
	Owner  *inner            `json:"owner,omitempty"`
	Extra  map[string]int    `json:"extra,omitempty"`
	Any    any               `json:"any,omitempty"`
	Flag   bool              `json:"flag,omitempty"`
	Nested inner             `json:"nested,omitzero"`
	Raw    json.RawMessage   `json:"raw,omitempty"`
	Labels map[string]string `json:"-"`
	hidden int
}

// timed adds what the fast path leaves to the full validator: a format.
type timed struct {
	sample
	When time.Time `json:"when,omitzero"`
	Blob []byte    `json:"blob,omitempty"`
}

func mustArgs(t testing.TB, s *jsonschema.Schema, err error) argSchema {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	a, err := compileArgs(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// withModes is sample's schema with an enum added, as a user would.
func withModes(t testing.TB) *jsonschema.Schema {
	s, err := SchemaFor[sample]()
	if err != nil {
		t.Fatal(err)
	}
	s.Properties["mode"].Enum = []any{"fast", "slow"}
	return s
}

func TestDerivedSchemaGolden(t *testing.T) {
	s, err := SchemaFor[timed]()
	a := mustArgs(t, s, err)
	var pretty bytes.Buffer
	json.Indent(&pretty, a.raw, "", "  ")
	pretty.WriteByte('\n')
	if *update {
		os.WriteFile("testdata/sample_schema.json", pretty.Bytes(), 0o644)
	}
	want, err := os.ReadFile("testdata/sample_schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if pretty.String() != string(want) {
		t.Errorf("derived schema:\n%s\nwant:\n%s", pretty.Bytes(), want)
	}
	if a.fast != nil {
		t.Error("a schema with a format got the fast path")
	}
	if s, err := SchemaFor[sample](); mustArgs(t, s, err).fast == nil {
		t.Error("sample's schema did not get the fast path")
	}
}

var argCases = []struct {
	name  string
	args  string
	probs []string // substrings, one per expected problem
	slow  bool     // valid, but only the full validator can tell
}{
	{"minimal", `{"query": "x"}`, nil, false},
	{"full", `{"query": "x", "limit": 3, "small": -128, "count": 7, "ratio": 0.5, "mode": "fast", "tags": ["a"],
	  "owner": {"name": "o"}, "extra": {"a": 1}, "any": [1, {"b": null}], "flag": true,
	  "nested": {"name": "n", "level": 2}, "raw": {"x": 1}}`, nil, false},
	{"null pointer and slice", `{"query": "x", "owner": null, "tags": null}`, nil, false},
	{"escaped key", `{"qu\u0065ry": "x"}`, nil, false},
	{"integer written 3.0", `{"query": "x", "limit": 3.0}`, nil, false},
	{"integers with exponents", `{"query": "x", "limit": 1e2, "count": 2.50E+1, "small": -1.27e2}`, nil, false},
	{"negative zero", `{"query": "x", "limit": -0.0, "count": -0}`, nil, false},
	{"integer with a long exponent", `{"query": "x", "limit": 1e10001}`, nil, true},
	{"missing required", `{"limit": 1}`, []string{"missing property 'query'"}, false},
	{"wrong type", `{"query": 5}`, []string{"query: got number, want string"}, false},
	{"fraction for integer", `{"query": "x", "limit": 1.5}`, []string{"limit: got number, want integer"}, false},
	{"int8 out of range", `{"query": "x", "small": 128}`, []string{"small: maximum: got 128, want 127"}, false},
	{"negative for uint", `{"query": "x", "count": -1e0}`, []string{"count: minimum: got -1, want 0"}, false},
	{"string for number", `{"query": "x", "ratio": "big"}`, []string{"ratio: got string, want number"}, false},
	{"unknown argument", `{"query": "x", "qeury": 1}`, []string{"additional properties 'qeury' not allowed"}, false},
	{"nested missing", `{"query": "x", "owner": {"level": 1}}`, []string{"owner: missing property 'name'"}, false},
	{"array item", `{"query": "x", "tags": ["a", 2]}`, []string{"tags[1]: got number, want string"}, false},
	{"map value", `{"query": "x", "extra": {"a": "b"}}`, []string{"extra.a: got string, want integer"}, false},
	{"null required", `{"query": null}`, []string{"query: got null, want string"}, false},
	{"not an object", `[1]`, []string{"got array, want object"}, false},
	{"several", `{"limit": "x", "zzz": 1}`, []string{"query", "zzz", "limit"}, false},
}

func TestValidateArguments(t *testing.T) {
	s, err := SchemaFor[sample]()
	a := mustArgs(t, s, err)
	for _, tt := range argCases {
		t.Run(tt.name, func(t *testing.T) {
			data := []byte(tt.args)
			if !json.Valid(data) {
				t.Fatalf("bad test: %s", tt.args)
			}
			probs := a.validate(data)
			if len(probs) != len(tt.probs) {
				t.Fatalf("problems %q, want %d like %q", probs, len(tt.probs), tt.probs)
			}
			all := strings.Join(probs, "\n")
			for _, want := range tt.probs {
				if !strings.Contains(all, want) {
					t.Errorf("problems %q do not say %q", probs, want)
				}
			}
			if fast := a.fast.accepts(data); fast != (probs == nil && !tt.slow) {
				t.Errorf("fast path accepts: %v", fast)
			}
		})
	}
}

func TestFastPathAllocatesNothing(t *testing.T) {
	s, err := SchemaFor[sample]()
	a := mustArgs(t, s, err)
	args := []byte(`{"query": "x", "limit": 3.0, "tags": ["a", "b"], "owner": {"name": "o"}, "mode": "slow", "extra": {"k": 1}}`)
	if !a.fast.accepts(args) {
		t.Fatal("fast path refused valid arguments")
	}
	if n := testing.AllocsPerRun(100, func() { a.validate(args) }); n != 0 {
		t.Errorf("validate allocates %v times per call", n)
	}
}

func TestWithSchema(t *testing.T) {
	modes := Must(Func("m", "", func(_ context.Context, in sample) (string, error) { return in.Mode, nil },
		WithSchema(withModes(t))))
	if !strings.Contains(string(modes.Info().Parameters), `"enum":["fast","slow"]`) {
		t.Errorf("parameters %s", modes.Info().Parameters)
	}
	if out, err := modes.Call(context.Background(), []byte(`{"query": "q", "mode": "slow"}`)); err != nil || string(out) != `"slow"` {
		t.Errorf("out %s err %v", out, err)
	}
	_, err := modes.Call(context.Background(), []byte(`{"query": "q", "mode": "medium"}`))
	var ae *ArgumentError
	if !errors.As(err, &ae) || !strings.Contains(ae.Problems[0], "mode: value must be one of 'fast', 'slow'") {
		t.Errorf("err = %v", err)
	}
}

func TestSchemaErrors(t *testing.T) {
	type rec struct {
		Next *rec `json:"next"`
	}
	type badMap struct {
		M map[int]string `json:"m"`
	}
	type ch struct {
		C chan int `json:"c"`
	}
	type emptyTag struct {
		A int `json:"a" jsonschema:""`
	}
	noop := func(context.Context, inner) (int, error) { return 0, nil }
	for _, tc := range []struct {
		name string
		f    func() (Tool, error)
		want string
	}{
		{"recursive", func() (Tool, error) { return Func("r", "", func(context.Context, rec) (int, error) { return 0, nil }) }, "cycle"},
		{"map key", func() (Tool, error) {
			return Func("m", "", func(context.Context, badMap) (int, error) { return 0, nil })
		}, "map key"},
		{"channel", func() (Tool, error) { return Func("c", "", func(context.Context, ch) (int, error) { return 0, nil }) }, "unsupported"},
		{"empty tag", func() (Tool, error) {
			return Func("e", "", func(context.Context, emptyTag) (int, error) { return 0, nil })
		}, "empty jsonschema tag"},
		{"not a struct", func() (Tool, error) {
			return Func("s", "", func(context.Context, string) (int, error) { return 0, nil })
		}, "not a struct"},
		{"bad name", func() (Tool, error) { return Func("bad name", "", noop) }, "invalid name"},
		{"schema not an object", func() (Tool, error) {
			return Func("n", "", noop, WithSchema(&jsonschema.Schema{Type: "array"}))
		}, `type must be "object"`},
		{"schema that does not compile", func() (Tool, error) {
			return Func("p", "", noop, WithSchema(&jsonschema.Schema{Type: "object", Pattern: "("}))
		}, "pattern"},
		{"bad idempotency", func() (Tool, error) { return Func("i", "", noop, WithIdempotency("sometimes")) }, "idempotency"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.f(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestIntegersWrittenAsDecimals(t *testing.T) {
	nested := Must(Func("n", "", func(_ context.Context, in sample) (int, error) { return in.Limit + in.Owner.Level, nil }))
	for _, tt := range []struct {
		name string
		tool Tool
		args string
		want string
	}{
		{"flat struct", addTool(), `{"a": 2.0, "b": 4e1}`, "42"},
		{"nested struct", nested, `{"query": "q", "limit": 4.0e1, "owner": {"name": "o", "level": 2.000}}`, "42"},
		{"too large for int", addTool(), `{"a": 1e30, "b": 1}`, "cannot hold"},
		{"long exponent", nested, `{"query": "q", "limit": 1e10001, "owner": {"name": "o"}}`, "cannot"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := tt.tool.Call(context.Background(), []byte(tt.args))
			var ae *ArgumentError
			switch {
			case err == nil && string(out) != tt.want:
				t.Errorf("out %s, want %s", out, tt.want)
			case err != nil && (!errors.As(err, &ae) || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("err = %v, want %s", err, tt.want)
			}
		})
	}
}

func TestIntegral(t *testing.T) {
	for _, tt := range []struct {
		tok             string
		yes, decided    bool
		canonical       string // "" when there is none
		canonicalExists bool
	}{
		{"0", true, true, "0", true},
		{"-12", true, true, "-12", true},
		{"1.0", true, true, "1", true},
		{"-0.0", true, true, "0", true},
		{"1.5", false, true, "", false},
		{"0.5e1", true, true, "5", true},
		{"25e-1", false, true, "", false},
		{"250e-1", true, true, "25", true},
		{"1E+2", true, true, "100", true},
		{"1e40", true, true, "1" + strings.Repeat("0", 40), false},
		{"1e39", true, true, "1" + strings.Repeat("0", 39), true},
		{"0.000e10000", true, true, "0", true},
		{"1e10001", false, false, "", false},
		{"1e-10001", false, false, "", false},
		{"0." + strings.Repeat("0", 10001), false, false, "", false},
	} {
		t.Run(tt.tok, func(t *testing.T) {
			yes, decided := integral([]byte(tt.tok))
			if yes != tt.yes || decided != tt.decided {
				t.Errorf("integral = %v, %v", yes, decided)
			}
			c, ok := canonicalInt(nil, []byte(tt.tok))
			if ok != tt.canonicalExists || ok && string(c) != tt.canonical {
				t.Errorf("canonicalInt = %s, %v", c, ok)
			}
		})
	}
	if got, changed := canonicalInts([]byte(`{"a": 1.0, "b": "2.0", "c": [3e0, 4.5, 1e99], "d": 7}`)); !changed ||
		string(got) != `{"a": 1, "b": "2.0", "c": [3, 4.5, 1e99], "d": 7}` {
		t.Errorf("canonicalInts = %s", got)
	}
	if _, changed := canonicalInts([]byte(`{"a": 1, "b": 2.5}`)); changed {
		t.Error("canonicalInts changed what it should not")
	}
}

// hasDuplicateKeys reports whether an object in data names a key twice;
// the fast path may then reject what the full validator, which keeps the
// last value, accepts.
func hasDuplicateKeys(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		keys   map[string]bool
		object bool
		key    bool // the next string token is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if s, ok := tok.(string); ok && top != nil && top.object && top.key {
			if top.keys[s] {
				return true
			}
			top.keys[s], top.key = true, false
			continue
		}
		if top != nil && top.object {
			top.key = true // a value ends here, or opens below
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{keys: map[string]bool{}, object: true, key: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}

// FuzzFastPath holds the fast path to the full validator: what it accepts
// the full validator accepts, and what it rejects the full validator
// rejects (unless an object repeats a key: the full validator keeps only
// the last value).
func FuzzFastPath(f *testing.F) {
	for _, c := range argCases {
		f.Add(c.args)
	}
	f.Add(`{"query": "x", "mode": "slow", "small": 1.27e2, "count": 4294967296}`)
	f.Add(`{"query": "x", "query": 1}`)
	plain, err := SchemaFor[sample]()
	schemas := []argSchema{mustArgs(f, plain, err), mustArgs(f, withModes(f), nil)}
	f.Fuzz(func(t *testing.T, args string) {
		data := []byte(args)
		if !json.Valid(data) {
			return
		}
		for _, a := range schemas {
			_, v := a.fast.check(data, skipWS(data, 0))
			full := a.full.ValidateJSON(data)
			if v == valid && full != nil {
				t.Fatalf("%s: the fast path accepts, the full validator says %v", args, full)
			}
			if v == invalid && full == nil && !hasDuplicateKeys(data) {
				t.Fatalf("%s: the fast path rejects, the full validator accepts", args)
			}
		}
	})
}

func TestHasDuplicateKeys(t *testing.T) {
	for in, want := range map[string]bool{
		`{"a": 1, "b": {"a": 2}}`:          false,
		`{"a": 1, "a": 2}`:                 true,
		`[{"a": {"x": 1}}, {"a": "a"}]`:    false,
		`{"a": ["a", "a"], "b": {"a": 1}}`: false,
		`{"a": {"b": 1, "b": 2}}`:          true,
	} {
		if hasDuplicateKeys([]byte(in)) != want {
			t.Errorf("hasDuplicateKeys(%s) != %v", in, want)
		}
	}
}
