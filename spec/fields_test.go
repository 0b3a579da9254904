package spec

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestInputJSONSchema: what an agent takes as a tool: its input_schema,
// else its input_keys as required strings, else one required task.
func TestInputJSONSchema(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Spec
		want string
	}{
		{"input_schema", Spec{InputSchema: json.RawMessage(`{"type":"object"}`)}, `{"type":"object"}`},
		{"input_keys", Spec{InputKeys: []string{"city", "days"}},
			`{"additionalProperties":false,"properties":{"city":{"type":"string"},"days":{"type":"string"}},"required":["city","days"],"type":"object"}`},
		{"a task", Spec{}, `{"additionalProperties":false,"properties":{"task":{"type":"string"}},"required":["task"],"type":"object"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(tc.s.InputJSONSchema()); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// TestLimitDefaults: the defaults fill only what a spec leaves at zero,
// and a caller's copy of them changes nobody else's.
func TestLimitDefaults(t *testing.T) {
	d := DefaultLimits()
	d.MaxTurns = 99
	if DefaultLimits().MaxTurns != 10 {
		t.Error("changing a copy of the defaults changed them")
	}
	got := Limits{MaxTurns: 3, MaxCostUSD: 0.5}.WithDefaults()
	if got.MaxTurns != 3 || got.MaxCostUSD != 0.5 || got.TimeoutMS != 300_000 || got.MaxParallelTools != 8 || got.MaxObservationBytes != 64<<10 {
		t.Errorf("WithDefaults = %+v", got)
	}
}

// TestTracingRecords: tracing off records nothing, a rate samples by
// id (the same id, the same choice), no tracing records everything.
func TestTracingRecords(t *testing.T) {
	off, half, none := false, 0.5, 0.0
	if !(*Tracing)(nil).Records("x") || (&Tracing{Enabled: &off}).Records("x") || (&Tracing{SampleRate: &none}).Records("x") {
		t.Error("nil records, enabled false and rate 0 do not")
	}
	sampled := 0
	for i := range 200 {
		id := strings.Repeat("a", i%7) + string(rune('a'+i%26)) + strings.Repeat("z", i/26)
		tr := &Tracing{SampleRate: &half}
		if tr.Records(id) != tr.Records(id) {
			t.Fatal("the same id, two choices")
		}
		if tr.Records(id) {
			sampled++
		}
	}
	if sampled < 60 || sampled > 140 {
		t.Errorf("%d of 200 sampled at 0.5", sampled)
	}
}

// TestRetryBudgetsPerTool: a tool's own settings override the spec's
// tool budget; fatal is per tool.
func TestRetryBudgetsPerTool(t *testing.T) {
	two := 2
	b := Retry{Tools: map[string]ToolRetry{"pay": {MaxRetries: &two, Fatal: true}}}.WithDefaults()
	if b.ToolTries("pay") != 3 || b.ToolTries("other") != 1 || !b.Fatal("pay") || b.Fatal("other") {
		t.Errorf("budgets %+v: pay %d tries fatal %v, other %d fatal %v", b, b.ToolTries("pay"), b.Fatal("pay"), b.ToolTries("other"), b.Fatal("other"))
	}
}

// TestWarnings: what a valid spec holds that likely is not meant.
func TestWarnings(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Spec
		want []string
	}{
		{"none", Spec{Limits: Limits{TimeoutMS: 1000, ToolTimeoutMS: 500}}, nil},
		{"a tool timeout past the run's", Spec{Limits: Limits{TimeoutMS: 1000, ToolTimeoutMS: 5000}}, []string{"limits.tool_timeout_ms 5000"}},
		{"a model timeout past the run's", Spec{Limits: Limits{TimeoutMS: 1000, ModelTimeoutMS: 5000}}, []string{"limits.model_timeout_ms 5000"}},
		{"a schema enum without enums", Spec{OutputSchema: json.RawMessage(`{"properties": {"tone": {"enum": ["a"]}, "tags": {"items": {"enum": ["x"]}}}}`)},
			[]string{"properties.tags has an enum", "properties.tone has an enum"}},
		{"a schema enum enums list", Spec{OutputSchema: json.RawMessage(`{"properties": {"tone": {"enum": ["a"]}}}`), Enums: map[string][]string{"tone": {"a"}}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := tc.s.Warnings()
			if len(ws) != len(tc.want) {
				t.Fatalf("warnings %v, want %v", ws, tc.want)
			}
			for i, w := range tc.want {
				if ws[i].Severity != SeverityWarning || !strings.Contains(ws[i].Message, w) {
					t.Errorf("warning %d %+v, want %q", i, ws[i], w)
				}
			}
		})
	}
}

// TestClone: a clone shares nothing a change could reach through.
func TestClone(t *testing.T) {
	rate := 0.5
	s := &Spec{AgentName: "a", Tools: []string{"x"}, Enums: map[string][]string{"f": {"a"}}, Defaults: map[string]any{"f": "a"},
		Tracing: &Tracing{SampleRate: &rate}, ModelSelection: &ModelSelection{Strategy: "cheapest"}}
	c := s.Clone()
	c.Tools[0], c.Enums["f"][0], c.Defaults["f"] = "y", "b", "b"
	*c.Tracing.SampleRate, c.ModelSelection.Strategy = 1, "fastest"
	if s.Tools[0] != "x" || s.Enums["f"][0] != "a" || s.Defaults["f"] != "a" || *s.Tracing.SampleRate != 0.5 || s.ModelSelection.Strategy != "cheapest" {
		t.Errorf("changing the clone changed the spec: %+v", s)
	}
	if (*Spec)(nil).Clone() != nil {
		t.Error("the clone of nil")
	}
}

// TestModesNeedModels: only plan and service run without a model.
func TestModesNeedModels(t *testing.T) {
	for m, want := range map[Mode]bool{ModeTools: true, ModeReAct: true, ModeChooser: true, ModePlan: false, ModeService: false} {
		if m.NeedsModel() != want {
			t.Errorf("%s.NeedsModel() = %v", m, !want)
		}
	}
}

// TestParseTTL: days or a Go duration, positive.
func TestParseTTL(t *testing.T) {
	for in, want := range map[string]time.Duration{"": 0, "30d": 720 * time.Hour, "36h": 36 * time.Hour, "90m": 90 * time.Minute} {
		if got, err := ParseTTL(in); err != nil || got != want {
			t.Errorf("ParseTTL(%q) = %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"0d", "-1d", "xd", "soon", "-5m", "0s"} {
		if _, err := ParseTTL(bad); err == nil {
			t.Errorf("ParseTTL(%q): no error", bad)
		}
	}
}

// TestExpandEnv: ${env:NAME} from the lookup; an unknown, unnamed or
// unclosed reference is an error naming it.
func TestExpandEnv(t *testing.T) {
	env := map[string]string{"TOKEN": "t0k", "HOST": "h"}
	look := func(n string) (string, bool) { v, ok := env[n]; return v, ok }
	for in, want := range map[string]string{"plain": "plain", "Bearer ${env:TOKEN}": "Bearer t0k", "${env:HOST}:${env:TOKEN}": "h:t0k"} {
		if got, err := ExpandEnv(in, look); err != nil || got != want {
			t.Errorf("ExpandEnv(%q) = %q, %v", in, got, err)
		}
	}
	for in, want := range map[string]string{"${env:MISSING}": "MISSING is not set", "${env:}": "not a variable name",
		"${env:A-B}": "not a variable name", "${env:TOKEN": "without its closing"} {
		if _, err := ExpandEnv(in, look); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ExpandEnv(%q) = %v, want %q", in, err, want)
		}
	}
}

// TestModelSelectionChecked: a strategy is one of three, a ceiling not
// negative, an output name a name.
func TestModelSelectionChecked(t *testing.T) {
	for _, tc := range []struct {
		extra, want string
	}{
		{`"model_selection": {"strategy": "cheapest", "max_completion_price": 5}`, ""},
		{`"model_selection": {"strategy": "random"}`, `model_selection.strategy "random"`},
		{`"model_selection": {"max_prompt_price": -1}`, "a price ceiling is negative"},
		{`"output_name": "the digest"`, `output_name "the digest"`},
		{`"output_name": "digest"`, ""},
	} {
		_, err := Parse("t", []byte(`{"agent_name": "a", "version": "v1", "model_name": "scripted:x", `+tc.extra+`}`))
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.extra, err, tc.want)
		}
	}
}
