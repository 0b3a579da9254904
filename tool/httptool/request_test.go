package httptool

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/tool"
)

// seen is what the test server received.
type seen struct {
	method, key, contentType, body, header string
}

func requestServer(t *testing.T) (*httptest.Server, func() []seen) {
	var mu sync.Mutex
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, seen{r.Method, r.Header.Get("Idempotency-Key"), r.Header.Get("Content-Type"), string(b), r.Header.Get("X-Who")})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		if r.Method != http.MethodHead {
			w.Write([]byte(`{"ok":true}`))
		}
	}))
	t.Cleanup(srv.Close)
	return srv, func() []seen {
		mu.Lock()
		defer mu.Unlock()
		return append([]seen(nil), got...)
	}
}

// callAs calls tl the way an agent's handler chain does: with its call,
// and so its idempotency key, in the context.
func callAs(tl tool.Tool, args string) (tool.Output, error) {
	c := &tool.Call{ID: "call_1", Name: tl.Info().Name, Arguments: json.RawMessage(args), Tool: tl, Info: tl.Info(),
		Turn: 2, Index: 1, Run: &tool.Run{RunID: "run_x"}}
	return tool.Handle(context.Background(), c)
}

func TestRequest(t *testing.T) {
	srv, got := requestServer(t)
	tl := NewRequest(Options{AllowPrivate: true, MaxBytes: 64})
	for _, tc := range []struct {
		name, args string
		want       seen
		class      tool.Idempotency
	}{
		{"post json", `{"method": "POST", "url": "URL/pay", "json": {"to": "bob", "amount": 5}, "headers": {"X-Who": "agentry", "Idempotency-Key": "forged"}}`,
			seen{"POST", "run_x:2:1", "application/json", `{"amount":5,"to":"bob"}`, "agentry"}, tool.NonIdempotent},
		{"patch text", `{"method": "patch", "url": "URL/note", "body": "hello"}`,
			seen{"PATCH", "run_x:2:1", "text/plain; charset=utf-8", "hello", ""}, tool.NonIdempotent},
		{"put", `{"method": "PUT", "url": "URL/item/1", "json": [1, 2]}`, seen{"PUT", "run_x:2:1", "application/json", "[1,2]", ""}, tool.Idempotent},
		{"delete", `{"method": "DELETE", "url": "URL/item/1"}`, seen{"DELETE", "run_x:2:1", "", "", ""}, tool.Idempotent},
		{"get sends no key", `{"method": "GET", "url": "URL/item/1"}`, seen{"GET", "", "", "", ""}, tool.Safe},
		{"head", `{"method": "HEAD", "url": "URL/item/1"}`, seen{"HEAD", "", "", "", ""}, tool.Safe},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := strings.Replace(tc.args, "URL", srv.URL, 1)
			if c := tl.(tool.Classifier).Idempotency(json.RawMessage(args)); c != tc.class {
				t.Errorf("class = %s, want %s", c, tc.class)
			}
			out, err := callAs(tl, args)
			if err != nil {
				t.Fatal(err)
			}
			var r Response
			if err := json.Unmarshal(out.JSON, &r); err != nil || r.Status != http.StatusCreated {
				t.Errorf("response %s: %v", out.JSON, err)
			}
			all := got()
			if last := all[len(all)-1]; last != tc.want {
				t.Errorf("server saw %+v, want %+v", last, tc.want)
			}
		})
	}
	info := tl.Info()
	if info.Deduplicates || info.Idempotency != tool.NonIdempotent || info.Name != "http_request" {
		t.Errorf("info = %+v; want http_request, non-idempotent by default, not deduplicating", info)
	}
}

// http_request deduplicates only a request to a host named as keeping
// one effect per Idempotency-Key, by its options or by the run's policy:
// most servers ignore the header, so claiming it would have a resumed run
// send a POST twice.
func TestRequestDeduplicatesOnlyNamedHosts(t *testing.T) {
	tl := NewRequest(Options{IdempotencyKeyHosts: []string{"api.stripe.com", "*.payments.example"}})
	withPolicy := policy.WithNetwork(context.Background(), &policy.Network{IdempotencyKeyHosts: []string{"ledger.example.org"}})
	for _, tc := range []struct {
		name string
		ctx  context.Context
		url  string
		want bool
	}{
		{"a host the options name", context.Background(), "https://api.stripe.com/v1/charges", true},
		{"a glob of the options", context.Background(), "https://eu.payments.example/pay", true},
		{"case does not matter", context.Background(), "https://API.Stripe.com/v1/charges", true},
		{"a host nobody names", context.Background(), "https://shop.example.com/order", false},
		{"a look-alike host", context.Background(), "https://api.stripe.com.evil.example/v1", false},
		{"a host the policy names", withPolicy, "https://ledger.example.org/entries", true},
		{"a host the policy does not name", withPolicy, "https://shop.example.com/order", false},
		{"no URL", context.Background(), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &tool.Call{Name: "http_request", Tool: tl, Info: tl.Info(),
				Arguments: json.RawMessage(`{"method": "POST", "url": "` + tc.url + `"}`)}
			if got := c.Deduplicates(tc.ctx); got != tc.want {
				t.Errorf("Deduplicates = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRequestRefuses(t *testing.T) {
	srv, got := requestServer(t)
	tl := NewRequest(Options{MaxBytes: 8})
	for _, tc := range []struct{ name, args, want string }{
		{"unknown method", `{"method": "TRACE", "url": "URL"}`, `method "TRACE" is not one of`},
		{"json and body", `{"method": "POST", "url": "URL", "json": 1, "body": "x"}`, "not both"},
		{"get with a body", `{"method": "GET", "url": "URL", "body": "x"}`, "GET requests carry no body"},
		{"body over the cap", `{"method": "POST", "url": "URL", "body": "0123456789"}`, "over the 8-byte cap"},
		{"not a URL", `{"method": "POST", "url": "mailto:bob"}`, "not an absolute http(s) URL"},
		{"loopback", `{"method": "POST", "url": "URL", "body": "x"}`, "private, loopback or local"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := callAs(tl, strings.Replace(tc.args, "URL", srv.URL, 1))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want it to say %q", err, tc.want)
			}
		})
	}
	if n := len(got()); n != 0 {
		t.Errorf("the server received %d refused requests", n)
	}
	_, err := callAs(tl, `{"method": "POST", "url": "`+srv.URL+`", "body": "x"}`)
	var d *tool.ErrorDetails
	if !errors.As(err, &d) || d.Type != "blocked" || d.Recoverable {
		t.Errorf("loopback error = %v, want a blocked, unrecoverable error", err)
	}
	if c := tl.(tool.Classifier).Idempotency(json.RawMessage(`not json`)); c != tool.NonIdempotent {
		t.Errorf("class of unreadable arguments = %s, want non_idempotent", c)
	}
}

// TestTraceContextHeaders: a run's trace context (traceparent and
// tracestate) goes with its requests; a traced call's span wins over it;
// a model-written traceparent is kept with its tracestate, and a
// tracestate the model wrote beside the run's traceparent is not sent;
// nothing is sent without a trace.
func TestTraceContextHeaders(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tid, _ := oteltrace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := oteltrace.SpanIDFromHex("b7ad6b7169203331")
	state, _ := oteltrace.ParseTraceState("span=1")
	spanCtx := oteltrace.ContextWithSpanContext(context.Background(),
		oteltrace.NewSpanContext(oteltrace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: oteltrace.FlagsSampled, TraceState: state}))
	cases := []struct {
		name           string
		ctx            context.Context
		run            *tool.Run
		headers        string // the model's, as JSON
		wantTP, wantTS string
	}{
		{"the run's", context.Background(), &tool.Run{TraceParent: tp, TraceState: "vendor=a"}, `{}`, tp, "vendor=a"},
		{"no trace", context.Background(), &tool.Run{}, `{}`, "", ""},
		{"the span's", spanCtx, &tool.Run{TraceParent: tp, TraceState: "vendor=a"}, `{}`,
			"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "span=1"},
		{"a model's tracestate beside the run's", context.Background(), &tool.Run{TraceParent: tp, TraceState: "vendor=a"},
			`{"tracestate": "evil=1"}`, tp, "vendor=a"},
		{"a model's tracestate, the run has none", context.Background(), &tool.Run{TraceParent: tp}, `{"tracestate": "evil=1"}`, tp, ""},
		{"a model's tracestate beside the span's", spanCtx, &tool.Run{}, `{"tracestate": "evil=1"}`,
			"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "span=1"},
		{"the model's own trace", context.Background(), &tool.Run{TraceParent: tp, TraceState: "vendor=a"},
			`{"traceparent": "00-11111111111111111111111111111111-2222222222222222-01", "tracestate": "mine=1"}`,
			"00-11111111111111111111111111111111-2222222222222222-01", "mine=1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var gotTP, gotTS string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotTP, gotTS = r.Header.Get("traceparent"), r.Header.Get("tracestate")
			}))
			defer srv.Close()
			tl := NewRequest(Options{AllowPrivate: true})
			tc.run.RunID = "run_t"
			c := &tool.Call{ID: "c", Name: "http_request", Tool: tl, Info: tl.Info(), Run: tc.run,
				Arguments: json.RawMessage(`{"method": "GET", "url": "` + srv.URL + `", "headers": ` + tc.headers + `}`)}
			if _, err := tool.Handle(tc.ctx, c); err != nil {
				t.Fatal(err)
			}
			if gotTP != tc.wantTP || gotTS != tc.wantTS {
				t.Errorf("traceparent %q, tracestate %q; want %q, %q", gotTP, gotTS, tc.wantTP, tc.wantTS)
			}
		})
	}
}
