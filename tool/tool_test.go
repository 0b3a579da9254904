package tool

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentry/agentry/retry"
)

type addArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

func addTool() Tool {
	return Must(Func("add", "Add two integers.", func(_ context.Context, in addArgs) (int, error) { return in.A + in.B, nil },
		WithIdempotency(Safe)))
}

func TestFuncCall(t *testing.T) {
	add := addTool()
	out, err := add.Call(context.Background(), json.RawMessage(`{"a": 2, "b": 40}`))
	if err != nil || string(out) != "42" {
		t.Fatalf("add = %s, %v", out, err)
	}
	_, err = add.Call(context.Background(), json.RawMessage(`{"a": "2"}`))
	var ae *ArgumentError
	if !errors.As(err, &ae) || len(ae.Problems) != 2 || ae.Tool != "add" {
		t.Fatalf("err = %v", err)
	}
	if d := ae.Details(); d.Type != "invalid_arguments" || !d.Recoverable {
		t.Errorf("details %+v", d)
	}
	if _, err := add.Call(context.Background(), json.RawMessage(`{"a": 1,`)); !errors.As(err, &ae) {
		t.Errorf("invalid JSON: %v", err)
	}
	if _, err := add.Call(context.Background(), json.RawMessage(`{"a": 99999999999999999999, "b": 1}`)); !errors.As(err, &ae) {
		t.Errorf("overflow: %v", err)
	}
	info := add.Info()
	if info.Name != "add" || info.Idempotency != Safe || !strings.Contains(string(info.Parameters), `"required":["a","b"]`) {
		t.Errorf("info %+v %s", info, info.Parameters)
	}
}

func TestRawTool(t *testing.T) {
	echo, err := New(Info{Name: "echo", Parameters: json.RawMessage(`{"type":"object","properties":{"s":{"type":"string","minLength":2}},"required":["s"]}`)},
		func(_ context.Context, args json.RawMessage) (json.RawMessage, error) { return args, nil })
	if err != nil {
		t.Fatal(err)
	}
	if out, err := echo.Call(context.Background(), json.RawMessage(`{"s":"hi"}`)); err != nil || string(out) != `{"s":"hi"}` {
		t.Errorf("%s %v", out, err)
	}
	_, err = echo.Call(context.Background(), json.RawMessage(`{"s":"h"}`))
	var ae *ArgumentError
	if !errors.As(err, &ae) || !strings.Contains(ae.Problems[0], "s:") {
		t.Errorf("err = %v", err)
	}
	if _, err := New(Info{Name: "x", Parameters: json.RawMessage(`{"type": 5}`)}, func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }); err == nil {
		t.Error("a bad schema compiled")
	}
	if echo.Info().Idempotency != NonIdempotent {
		t.Error("default idempotency is not non_idempotent")
	}
}

func TestRegistry(t *testing.T) {
	r, err := NewRegistry(addTool())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Register(addTool()); !errors.Is(err, ErrDuplicate) {
		t.Errorf("duplicate: %v", err)
	}
	if _, ok := r.Get("add"); !ok {
		t.Error("Get(add) failed")
	}
	if _, ok := r.Get("sub"); ok {
		t.Error("Get(sub) found something")
	}
	if !r.Unregister("add") || r.Unregister("add") || r.Len() != 0 {
		t.Error("Unregister")
	}
	bad := Must(New(Info{Name: "ok"}, func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }))
	_ = bad
	var zero Registry
	if err := zero.Register(addTool()); err != nil || len(zero.Names()) != 1 {
		t.Errorf("zero registry: %v", err)
	}
}

func call(t Tool, args string) *Call {
	return &Call{ID: "c1", Name: t.Info().Name, Arguments: json.RawMessage(args), Tool: t, Info: t.Info()}
}

func TestMiddleware(t *testing.T) {
	ctx := context.Background()
	fast := retry.Policy{Attempts: 3, InitialBackoff: time.Microsecond}
	slow := Must(Func("slow", "", func(ctx context.Context, _ inner) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	}, WithIdempotency(Safe)))
	// late answers success once its deadline passed: a tool that
	// finished its effect and ignored the context.
	late := Must(Func("late", "", func(ctx context.Context, _ inner) (int, error) {
		<-ctx.Done()
		return 42, nil
	}, WithIdempotency(NonIdempotent)))
	slowPay := Must(Func("pay", "", func(ctx context.Context, _ inner) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	}, WithIdempotency(NonIdempotent)))
	panicky := Must(Func("boom", "", func(context.Context, inner) (int, error) { panic("kaboom") }))
	var calls atomic.Int32
	flaky := func(c Idempotency) Tool {
		calls.Store(0)
		return Must(Func("t", "", func(context.Context, inner) (int, error) {
			if calls.Add(1) < 3 {
				return 0, Transient(errors.New("flaky"))
			}
			return 7, nil
		}, WithIdempotency(c)))
	}
	big := Must(Func("big", "", func(context.Context, inner) (string, error) { return strings.Repeat("é", 100), nil }, WithIdempotency(Safe)))
	tests := []struct {
		name     string
		tool     Tool
		args     string
		mws      []Middleware
		wantOut  string
		wantErr  string // the ErrorDetails type, "" for success
		attempts int
		check    func(t *testing.T, out Output)
	}{
		{"timeout retried for a safe tool", slow, `{"name":"x"}`, []Middleware{Retry(fast, nil), Timeout(5 * time.Millisecond)}, "", "timeout", 3, nil},
		{"a late success keeps its result", late, `{"name":"x"}`, []Middleware{Retry(fast, nil), Timeout(5 * time.Millisecond)}, "42", "", 1, nil},
		{"a non-idempotent call cut off is of unknown outcome", slowPay, `{"name":"x"}`, []Middleware{Retry(fast, nil), Timeout(5 * time.Millisecond)}, "", "unknown_outcome", 1,
			nil},
		{"panic becomes an error", panicky, `{"name":"x"}`, []Middleware{Recover(nil)}, "", "panic", 0, nil},
		{"idempotent retried until it works", flaky(Idempotent), `{"name":"x"}`, []Middleware{Retry(fast, nil)}, "7", "", 3, nil},
		{"non-idempotent never retried", flaky(NonIdempotent), `{"name":"x"}`, []Middleware{Retry(fast, nil)}, "", "transient", 1, nil},
		{"argument errors are not retried", addTool(), `{}`, []Middleware{Retry(fast, nil)}, "", "invalid_arguments", 1, nil},
		{"truncation keeps the JSON whole", big, `{"name":"x"}`, []Middleware{Truncate(51)}, "", "", 0, func(t *testing.T, out Output) {
			if len(out.JSON) != 202 || !strings.HasPrefix(out.Observation, `"`+strings.Repeat("é", 25)+"\n[truncated: 151 of 202 bytes") {
				t.Errorf("output %d bytes, observation %q", len(out.JSON), out.Observation)
			}
		}},
		{"a cut never makes it longer", big, `{"name":"x"}`, []Middleware{Truncate(180)}, "", "", 0, func(t *testing.T, out Output) {
			if obs := out.Observation; len(obs) > len(out.JSON) || strings.Contains(obs, "truncated") {
				t.Errorf("a %d-byte output observed as %d bytes: %q", len(out.JSON), len(obs), obs)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "idempotent retried until it works" || tt.name == "non-idempotent never retried" {
				calls.Store(0)
			}
			c := call(tt.tool, tt.args)
			out, err := Chain(Handle, tt.mws...)(ctx, c)
			var d *ErrorDetails
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("err = %v", err)
			case tt.wantErr != "" && (err == nil || !errors.As(err, &d) && tt.wantErr != "transient" && tt.wantErr != "invalid_arguments"):
				t.Fatalf("err = %v, want %s", err, tt.wantErr)
			case tt.wantErr == "invalid_arguments":
				var ae *ArgumentError
				if !errors.As(err, &ae) {
					t.Errorf("err = %v, want an ArgumentError", err)
				}
			case d != nil && d.Type != tt.wantErr:
				t.Errorf("error type %s, want %s", d.Type, tt.wantErr)
			case d != nil && d.Recoverable != IsTransient(err):
				t.Errorf("error %s: recoverable %v, transient %v", d.Type, d.Recoverable, IsTransient(err))
			}
			if tt.wantOut != "" && string(out.JSON) != tt.wantOut {
				t.Errorf("out = %s, want %s", out.JSON, tt.wantOut)
			}
			if tt.attempts > 0 && c.Attempt != tt.attempts {
				t.Errorf("attempts = %d, want %d", c.Attempt, tt.attempts)
			}
			if tt.check != nil {
				tt.check(t, out)
			}
		})
	}
}

// A user's middleware in a few lines: one counts calls, one rewrites
// arguments; the tool sees the rewritten ones and its call in its context.
func TestUserMiddleware(t *testing.T) {
	var counted atomic.Int32
	count := func(next Handler) Handler {
		return func(ctx context.Context, c *Call) (Output, error) {
			counted.Add(1)
			return next(ctx, c)
		}
	}
	upper := func(next Handler) Handler {
		return func(ctx context.Context, c *Call) (Output, error) {
			c.Arguments = json.RawMessage(strings.ToUpper(string(c.Arguments)))
			return next(ctx, c)
		}
	}
	var seen *Call
	echo := Must(Func("echo", "", func(ctx context.Context, in struct {
		NAME string `json:"NAME"`
	}) (string, error) {
		seen = CallFrom(ctx)
		return in.NAME, nil
	}))
	h := Chain(Handle, count, upper)
	c := call(echo, `{"name":"ada"}`)
	c.Run, c.Turn = &Run{RunID: "run_1"}, 1
	for range 2 {
		out, err := h(context.Background(), c)
		if err != nil || string(out.JSON) != `"ADA"` {
			t.Fatalf("out %s err %v", out.JSON, err)
		}
	}
	if counted.Load() != 2 || seen == nil || seen.Key() != "run_1:1:0" {
		t.Errorf("counted %d, the tool saw call %+v", counted.Load(), seen)
	}
	if CallFrom(context.Background()) != nil {
		t.Error("CallFrom outside a call")
	}
}

func TestNormalize(t *testing.T) {
	msg := "done"
	tests := []struct {
		in         any
		wantStatus Status
		wantData   string
		wantErr    bool
	}{
		{nil, StatusSuccess, "null", false},
		{map[string]any{"a": 1.0}, StatusSuccess, `{"a":1}`, false},
		{42, StatusSuccess, `{"result":42}`, false},
		{[]string{"x"}, StatusSuccess, `{"result":["x"]}`, false},
		{json.RawMessage(`{"status":"error","error":{"type":"not_found","message":"gone","recoverable":false}}`), StatusError, "null", false},
		{map[string]any{"status": "success", "data": map[string]any{"k": "v"}, "message": msg}, StatusSuccess, `{"k":"v"}`, false},
		{errors.New("bad"), StatusError, "null", false},
		{Success(map[string]any{"x": true}, msg), StatusSuccess, `{"x":true}`, false},
		{Result{Status: StatusError}, StatusError, "null", true},
		{map[string]any{"status": "maybe"}, "", "", true},
		{json.RawMessage(`{`), "", "", true},
		{struct {
			A int `json:"a"`
		}{3}, StatusSuccess, `{"a":3}`, false},
	}
	for i, tt := range tests {
		r, err := Normalize(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("%d: err = %v", i, err)
			continue
		}
		if err != nil {
			continue
		}
		data, _ := json.Marshal(r.Data)
		if r.Status != tt.wantStatus || string(data) != tt.wantData {
			t.Errorf("%d: Normalize(%v) = %s %s, want %s %s", i, tt.in, r.Status, data, tt.wantStatus, tt.wantData)
		}
	}
	if d := DetailsFrom(context.DeadlineExceeded, false); d.Type != "timeout" || !d.Recoverable {
		t.Errorf("DetailsFrom(deadline) = %+v", d)
	}
	if d := NotFound("key", "k1"); d.Type != "not_found" || !strings.Contains(d.Error(), `key "k1" not found`) {
		t.Errorf("NotFound = %v", d)
	}
	if _, err := ParseStatus("nope"); err == nil {
		t.Error("ParseStatus(nope) succeeded")
	}
}

func TestConnectors(t *testing.T) {
	RegisterConnector("test-conn", func(cfg json.RawMessage, baseDir string) ([]Tool, func() error, error) {
		return []Tool{Must(Func("conn_tool", "A tool of a connector.", func(context.Context, struct{}) (string, error) { return baseDir, nil }))}, nil, nil
	})
	tools, _, err := OpenConnector("test-conn", nil, "/base")
	if err != nil || len(tools) != 1 || tools[0].Info().Name != "conn_tool" {
		t.Fatalf("OpenConnector = %v, %v", tools, err)
	}
	if _, _, err := OpenConnector("nope", nil, ""); err == nil || !strings.Contains(err.Error(), `unknown connector "nope"`) || !strings.Contains(err.Error(), "test-conn") {
		t.Errorf("an unknown connector: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("registering a name twice did not panic")
		}
	}()
	RegisterConnector("test-conn", nil)
}

// TestAttachments: what a tool attaches through CallFrom is on its call
// for a middleware to read after the tool ran; a later name replaces an
// earlier one, and a call that attached nothing has none.
func TestAttachments(t *testing.T) {
	tests := []struct {
		name    string
		attach  [][2]string
		want    map[string]string
		wantNil bool
	}{
		{"nothing", nil, nil, true},
		{"one", [][2]string{{"report", "s3://r/q3.pdf"}}, map[string]string{"report": "s3://r/q3.pdf"}, false},
		{"a name again", [][2]string{{"report", "s3://r/v1.pdf"}, {"log", "/tmp/x.log"}, {"report", "s3://r/v2.pdf"}},
			map[string]string{"report": "s3://r/v2.pdf", "log": "/tmp/x.log"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			maker := Must(Func("make", "", func(ctx context.Context, _ inner) (int, error) {
				c := CallFrom(ctx)
				for _, a := range tt.attach {
					c.Attach(a[0], a[1])
				}
				return 1, nil
			}))
			var seen map[string]string
			watch := func(next Handler) Handler {
				return func(ctx context.Context, c *Call) (Output, error) {
					out, err := next(ctx, c)
					seen = c.Attachments()
					return out, err
				}
			}
			if _, err := Chain(Handle, watch)(context.Background(), call(maker, `{"name":"q3"}`)); err != nil {
				t.Fatal(err)
			}
			if (seen == nil) != tt.wantNil || len(seen) != len(tt.want) {
				t.Fatalf("attachments %v, want %v", seen, tt.want)
			}
			for k, v := range tt.want {
				if seen[k] != v {
					t.Errorf("attachments[%q] = %q, want %q", k, seen[k], v)
				}
			}
		})
	}
}

func TestNameFor(t *testing.T) {
	long := strings.Repeat("x", 70)
	for _, tc := range []struct{ in, want string }{
		{"read_text_file", "read_text_file"},
		{"fs_read_text_file", "fs_read_text_file"},
		{"weather.now", "weather_now"},
		{"files/read", "files_read"},
		{"café", "caf_"},
		{"Travel Agent", "Travel_Agent"},
	} {
		if got := NameFor(tc.in); got != tc.want {
			t.Errorf("NameFor(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, s := range []string{long, "", "é"} {
		if got := NameFor(s); !ValidName(got) {
			t.Errorf("NameFor(%q) = %q: not a valid name", s, got)
		}
	}
	if a, b := NameFor(long), NameFor(long+"y"); a == b || len(a) != 64 || !strings.HasPrefix(a, strings.Repeat("x", 55)+"_") {
		t.Errorf("long names: %q and %q", a, b)
	}
}
