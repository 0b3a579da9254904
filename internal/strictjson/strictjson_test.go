package strictjson

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

type inner struct {
	Max int `json:"max_turns"`
}

type doc struct {
	Name   string            `json:"name"`
	Limits inner             `json:"limits"`
	List   []inner           `json:"list"`
	ByName map[string]inner  `json:"by_name"`
	Free   map[string]any    `json:"free"`
	Raw    json.RawMessage   `json:"raw"`
	Ptr    *inner            `json:"ptr"`
	Tags   map[string]string `json:"-"`
}

func TestDecode(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"name": "a", "limits": {"max_turns": 2}, "free": {"anything": {"x": 1}}, "raw": {"y": [1]}}`, ""},
		{`{"nmae": "a"}`, `unknown field "nmae" (did you mean "name"?)`},
		{`{"limits": {"max_turn": 2}}`, `unknown field "limits.max_turn" (did you mean "max_turns"?)`},
		{`{"list": [{"max_turns": 1}, {"maxturns": 1}]}`, `unknown field "list[1].maxturns"`},
		{`{"by_name": {"k": {"zzz": 1}}}`, `unknown field "by_name.k.zzz"`},
		{`{"ptr": {"q": 1}}`, `unknown field "ptr.q"`},
		{`{"completely_different": 1}`, `unknown field "completely_different"`},
		{`{"limits": {"max_turns": "x"}}`, `field "limits.max_turns": expected an integer, got JSON string`},
		{"{\n  \"name\": \"a\",\n  oops\n}", "line 3, column 3"},
		{`{"name": "a"} {"name": "b"}`, "unexpected data after"},
		{``, "empty document"},
		{`[]`, "expected an object"},
	}
	for _, tt := range tests {
		var d doc
		err := Decode([]byte(tt.in), &d)
		if tt.want == "" {
			if err != nil {
				t.Errorf("Decode(%s) = %v", tt.in, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Decode(%s) = %v, want %q", tt.in, err, tt.want)
		}
	}
	var ufe *UnknownFieldError
	if err := Decode([]byte(`{"x": 1}`), &doc{}); !errors.As(err, &ufe) || ufe.Path != "x" {
		t.Errorf("errors.As UnknownFieldError: %v", err)
	}
}
