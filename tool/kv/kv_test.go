package kv

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/agentry/agentry/tool"
)

func TestTools(t *testing.T) {
	s := NewStore()
	r, err := tool.NewRegistry(Tools(s)...)
	if err != nil {
		t.Fatal(err)
	}
	call := func(name, args string) (string, error) {
		tl, ok := r.Get(name)
		if !ok {
			t.Fatalf("no tool %s", name)
		}
		out, err := tl.Call(context.Background(), json.RawMessage(args))
		return string(out), err
	}
	steps := []struct {
		tool, args, want string
		wantErr          string
	}{
		{"kv_set", `{"key": "a", "value": {"n": 1}}`, `{"key":"a","stored":true}`, ""},
		{"kv_set", `{"key": "b", "value": "two"}`, `{"key":"b","stored":true}`, ""},
		{"kv_set", `{"key": "c:1", "value": null}`, `{"key":"c:1","stored":true}`, ""},
		{"kv_get", `{"key": "a"}`, `{"key":"a","value":{"n":1}}`, ""},
		{"kv_list", `{}`, `{"keys":["a","b","c:1"]}`, ""},
		{"kv_list", `{"prefix": "c:"}`, `{"keys":["c:1"]}`, ""},
		{"kv_delete", `{"key": "b"}`, `{"key":"b","deleted":true}`, ""},
		{"kv_delete", `{"key": "b"}`, `{"key":"b","deleted":false}`, ""},
		{"kv_get", `{"key": "b"}`, "", "not_found"},
		{"kv_get", `{}`, "", "invalid"},
		{"kv_set", `{"key": "x"}`, "", "invalid"},
	}
	for _, st := range steps {
		got, err := call(st.tool, st.args)
		if st.wantErr != "" {
			var d *tool.ErrorDetails
			var ae *tool.ArgumentError
			switch {
			case st.wantErr == "not_found" && errors.As(err, &d) && d.Type == "not_found":
			case st.wantErr == "invalid" && errors.As(err, &ae):
			default:
				t.Errorf("%s %s: err = %v, want %s", st.tool, st.args, err, st.wantErr)
			}
			continue
		}
		if err != nil || got != st.want {
			t.Errorf("%s %s = %s, %v; want %s", st.tool, st.args, got, err, st.want)
		}
	}
	for name, want := range map[string]tool.Idempotency{"kv_get": tool.Safe, "kv_list": tool.Safe, "kv_set": tool.Idempotent, "kv_delete": tool.Idempotent} {
		tl, _ := r.Get(name)
		if tl.Info().Idempotency != want {
			t.Errorf("%s is %s, want %s", name, tl.Info().Idempotency, want)
		}
	}
}
