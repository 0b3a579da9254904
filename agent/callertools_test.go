package agent

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentry/agentry/internal/testdb"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/tool"
)

const callerToolsSpec = `{"agent_name": "helper", "version": "v1", "system_text": "Help.", "tools": ["add"],
	"caller_tools": [{"name": "weather", "description": "The weather in a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]}`

// A turn that calls the agent's own tool and a caller's runs the first
// and hands the second back: the run pauses on it, and goes on when its
// caller gives the result, the model shown both.
func TestCallerTools(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, testdb.SQLite(t))
	model := &recorder{replies: []reply{
		calls(call("c1", "add", `{"a": 2, "b": 3}`), call("c2", "weather", `{"city": "Oslo"}`)),
		answer("5, and sunny"),
	}}
	a := newTestAgent(t, callerToolsSpec, model)
	if got := names(a.Tools()); got != "add,weather" {
		t.Fatalf("tools offered %s; want the agent's and the caller's", got)
	}
	res, err := a.Run(ctx, map[string]any{"task": "sum and weather"}, WithStore(st))
	if !errors.Is(err, ErrAwaitingApproval) {
		t.Fatalf("run: %v; want it paused on the caller's call", err)
	}
	if len(res.Waiting) != 1 || res.Waiting[0].Rule != RuleCaller || res.Waiting[0].Tool != "weather" || res.Waiting[0].Key != res.ID+":1:1" {
		t.Fatalf("waiting %+v; want the weather call, the caller's", res.Waiting)
	}
	if run, _ := st.Get(ctx, res.ID); run.Status != store.AwaitingApproval {
		t.Fatalf("stored as %s", run.Status)
	}
	if len(res.Steps) == 0 || res.Steps[0].Observation != "5" {
		t.Fatalf("steps %+v; want the agent's own call run", res.Steps)
	}
	t.Run("refused", func(t *testing.T) {
		for name, opt := range map[string]RunOption{
			"approving the caller's call": Approve(res.ID + ":1:1"),
			"a result of no waiting call": CallerResult("c9", "x"),
		} {
			if _, err := a.Resume(ctx, st, res.ID, opt); !errors.Is(err, ErrNoSuchCall) {
				t.Errorf("%s: %v; want ErrNoSuchCall", name, err)
			}
		}
		if _, err := a.Run(ctx, map[string]any{"task": "x"}); !errors.Is(err, ErrConfig) {
			t.Errorf("a run without a store: %v; want ErrConfig", err)
		}
		if _, err := a.NewSession(nil, WithStore(st), CallerResult("c2", "x")); !errors.Is(err, ErrConfig) {
			t.Errorf("a result given to a new run: %v; want ErrConfig", err)
		}
	})
	res, err = resumeRun(t, a, st, res.ID, CallerResult("c2", "sunny, 21C"))
	if err != nil || !res.Success || res.Result != "5, and sunny" {
		t.Fatalf("resumed: %v %+v", err, res)
	}
	last := model.reqs[len(model.reqs)-1].Messages
	var seen []string
	for _, m := range last {
		if m.Role == llm.RoleTool {
			seen = append(seen, m.ToolCallID+"="+m.Content)
		}
	}
	if strings.Join(seen, " ") != "c1=5 c2=sunny, 21C" {
		t.Fatalf("the model was shown %v; want both results", seen)
	}
}

// A caller that does not run a call it was handed denies it: the model is
// told, and the run goes on.
func TestCallerToolDenied(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, testdb.SQLite(t))
	model := &recorder{replies: []reply{calls(call("c1", "weather", `{"city": "Oslo"}`)), answer("no weather")}}
	a := newTestAgent(t, callerToolsSpec, model)
	res, err := a.Run(ctx, map[string]any{"task": "weather"}, WithStore(st))
	if !errors.Is(err, ErrAwaitingApproval) {
		t.Fatal(err)
	}
	res, err = resumeRun(t, a, st, res.ID, Deny("c1"), WithDenyReason("offline"))
	if err != nil || !res.Success {
		t.Fatalf("resumed: %v", err)
	}
	if obs := res.Steps[0].Observation; !strings.Contains(obs, "did not run") || !strings.Contains(obs, "offline") {
		t.Fatalf("observation %q; want the denial and its reason", obs)
	}
}

// A caller's tool is named as tools are, apart from the agent's own.
func TestCallerToolsChecked(t *testing.T) {
	for name, tc := range map[string]struct{ spec, want string }{
		"clash":  {`{"agent_name": "h", "system_text": "x", "tools": ["add"], "caller_tools": [{"name": "add"}]}`, "one of the agent's tools"},
		"twice":  {`{"agent_name": "h", "system_text": "x", "caller_tools": [{"name": "w"}, {"name": "w"}]}`, "listed twice"},
		"name":   {`{"agent_name": "h", "system_text": "x", "caller_tools": [{"name": "a b"}]}`, "not a valid tool name"},
		"mode":   {`{"agent_name": "h", "system_text": "x", "mode": "writer", "output_schema": {"type": "object"}, "caller_tools": [{"name": "w"}]}`, "calls no tools"},
		"params": {`{"agent_name": "h", "system_text": "x", "caller_tools": [{"name": "w", "parameters": [1]}]}`, "not a JSON object"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := spec.Parse("test", []byte(tc.spec))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v; want %q", err, tc.want)
			}
		})
	}
}

func names(infos []tool.Info) string {
	out := make([]string, len(infos))
	for i, in := range infos {
		out[i] = in.Name
	}
	return strings.Join(out, ",")
}

// A forced tool choice holds for the run's first model call only ("none"
// for every call); one the agent cannot honour is refused.
func TestToolChoice(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ choice, first, second string }{
		{"add", "add", ""},
		{"required", "required", ""},
		{"none", "none", "none"},
		{"auto", "", ""},
	} {
		t.Run(tc.choice, func(t *testing.T) {
			model := &recorder{replies: []reply{calls(call("c1", "add", `{"a": 1, "b": 1}`)), answer("2")}}
			a := newTestAgent(t, `{"agent_name": "h", "version": "v1", "system_text": "x", "tools": ["add"]}`, model)
			if _, err := a.Run(ctx, map[string]any{"task": "x"}, WithToolChoice(tc.choice)); err != nil {
				t.Fatal(err)
			}
			if got := model.reqs[0].ToolChoice + "," + model.reqs[1].ToolChoice; got != tc.first+","+tc.second {
				t.Fatalf("tool choices %s; want %s,%s", got, tc.first, tc.second)
			}
		})
	}
	a := newTestAgent(t, `{"agent_name": "h", "version": "v1", "system_text": "x", "tools": ["add"]}`, &recorder{})
	if _, err := a.NewSession(nil, WithToolChoice("rm")); !errors.Is(err, ErrConfig) {
		t.Errorf("a tool the agent lacks: %v; want ErrConfig", err)
	}
}

// A caller's tools make another agent, under a version of its own, whose
// stored runs resume with them.
func TestWithCallerTools(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, testdb.SQLite(t))
	model := &recorder{replies: []reply{calls(call("c1", "weather", `{}`)), answer("sunny")}}
	base := newTestAgent(t, `{"agent_name": "h", "version": "v1", "system_text": "x", "tools": ["add"]}`, model)
	a, err := base.WithCallerTools(llm.ToolSpec{Name: "weather"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if v := a.Spec().Version; !strings.HasPrefix(v, "v1-tools.") || len(v) != len("v1-tools.")+8 {
		t.Fatalf("version %q", v)
	}
	if _, err := base.WithCallerTools(llm.ToolSpec{Name: "add"}); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "one of the agent's tools") {
		t.Fatalf("a caller's tool named as the agent's: %v", err)
	}
	res, err := a.Run(ctx, map[string]any{"task": "x"}, WithStore(st))
	if !errors.Is(err, ErrAwaitingApproval) {
		t.Fatal(err)
	}
	stored := storedAgent(t, st, res.ID, WithProvider(model, "test"), WithTools(testTools(t)))
	defer stored.Close()
	if res, err = resumeRun(t, stored, st, res.ID, CallerResult(res.ID+":1:0", "sunny")); err != nil || res.Result != "sunny" {
		t.Fatalf("resumed by the stored agent: %v %v", err, res.Result)
	}
}

// A caller's instructions follow the agent's system prompt for one run:
// the next run of its conversation does not start from them, and a
// resume sends them again.
func TestWithInstructions(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, testdb.SQLite(t)).Store
	model := &recorder{replies: []reply{answer("one"), calls(call("c1", "weather", `{}`)), answer("two")}}
	a := newTestAgent(t, callerToolsSpec, model)
	if _, err := a.Run(ctx, map[string]any{"task": "a"}, WithStore(st), WithConversation("c"), WithInstructions("Be brief.")); err != nil {
		t.Fatal(err)
	}
	res, err := a.Run(ctx, map[string]any{"task": "b"}, WithStore(st), WithConversation("c"), WithInstructions("Be kind."))
	if !errors.Is(err, ErrAwaitingApproval) {
		t.Fatal(err)
	}
	if _, err := resumeRun(t, a, st, res.ID, CallerResult("c1", "sun")); err != nil {
		t.Fatal(err)
	}
	for i, req := range model.reqs {
		var system []string
		for _, m := range req.Messages {
			if m.Role == llm.RoleSystem {
				system = append(system, m.Content)
			}
		}
		want := "Help.|Be brief."
		if i > 0 {
			want = "Help.|Be kind."
		}
		if got := strings.Join(system, "|"); got != want {
			t.Errorf("request %d's system messages %q; want %q", i, got, want)
		}
	}
}

// A call of a caller's tool whose arguments do not match its parameters
// is not handed back: the model is told, as for a tool of its own, and
// the corrected call is.
func TestCallerToolArgumentsChecked(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, testdb.SQLite(t))
	model := &recorder{replies: []reply{
		calls(call("c1", "weather", `{"city": 7}`)),
		calls(call("c2", "weather", `{"city": "Oslo"}`)),
	}}
	a := newTestAgent(t, callerToolsSpec, model)
	res, err := a.Run(ctx, map[string]any{"task": "weather"}, WithStore(st))
	if !errors.Is(err, ErrAwaitingApproval) || len(res.Waiting) != 1 || res.Waiting[0].CallID != "c2" {
		t.Fatalf("%v %+v; want the corrected call handed back", err, res.Waiting)
	}
	if obs := res.Steps[0].Observation; !strings.Contains(obs, "invalid_arguments") {
		t.Fatalf("the model was shown %q; want the arguments refused", obs)
	}
}
