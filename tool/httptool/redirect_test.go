package httptool

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/tool"
)

// Two public addresses the guard lets through, which the test transport
// dials as two local servers.
const (
	hostA = "93.184.216.34"
	hostB = "93.184.216.35"
)

// hit is a request a test server received.
type hit struct{ method, path, body, who, key string }

type recorder struct {
	mu   sync.Mutex
	hits []hit
}

func (r *recorder) add(h hit) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hits = append(r.hits, h)
}

func (r *recorder) all() []hit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hit(nil), r.hits...)
}

// redirector serves /to/STATUS?url=U as a redirect with that status, and
// answers anything else with what it received.
func redirector(t *testing.T) (*httptest.Server, *recorder) {
	rec := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rec.add(hit{r.Method, r.URL.Path, string(b), r.Header.Get("X-Who"), r.Header.Get("Idempotency-Key")})
		if status, ok := strings.CutPrefix(r.URL.Path, "/to/"); ok {
			w.Header().Set("Location", r.URL.Query().Get("url"))
			code := map[string]int{"302": 302, "303": 303, "307": 307, "308": 308}[status]
			w.WriteHeader(code)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok": true}`))
	}))
	t.Cleanup(srv.Close)
	return srv, rec
}

// publicTransport dials hostA and hostB as the two servers, and any
// other address as itself.
func publicTransport(a, b *httptest.Server) http.RoundTripper {
	d := &net.Dialer{}
	return &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		switch addr {
		case hostA + ":80":
			addr = a.Listener.Addr().String()
		case hostB + ":80":
			addr = b.Listener.Addr().String()
		}
		return d.DialContext(ctx, network, addr)
	}, DisableKeepAlives: true}
}

// Every hop of a redirect passes the checks the first request passed,
// and no hop carries the model's headers or body to another origin.
func TestRedirects(t *testing.T) {
	a, recA := redirector(t)
	b, recB := redirector(t)
	local, recLocal := redirector(t)
	tr := publicTransport(a, b)
	both := &policy.Network{AllowHosts: []string{hostA, hostB}}
	onlyA := &policy.Network{AllowHosts: []string{hostA}}
	to := func(status, target string) string { return "http://" + hostA + "/to/" + status + "?url=" + target }
	for _, tc := range []struct {
		name    string
		network *policy.Network
		args    string
		errType string // the error the call gets, "" for none
		status  int    // else the status the model sees
		atB     []hit  // what the other host received
	}{
		{"to a host outside allow_hosts", onlyA,
			`{"method": "GET", "url": "` + to("302", "http://"+hostB+"/x") + `"}`, "policy_violation", 0, nil},
		{"to another allowed host, without the model's headers", both,
			`{"method": "GET", "url": "` + to("302", "http://"+hostB+"/x") + `", "headers": {"X-Who": "secret-token"}}`, "", 200,
			[]hit{{method: "GET", path: "/x"}}},
		{"a 307 of a POST to another host is not followed", both,
			`{"method": "POST", "url": "` + to("307", "http://"+hostB+"/pay") + `", "json": {"amount": 5}, "headers": {"X-Who": "secret-token"}}`,
			"", 307, nil},
		{"a 308 of a PUT to another host is not followed", both,
			`{"method": "PUT", "url": "` + to("308", "http://"+hostB+"/pay") + `", "body": "x"}`, "", 308, nil},
		{"a 303 of a POST to another host becomes a bare GET", both,
			`{"method": "POST", "url": "` + to("303", "http://"+hostB+"/done") + `", "json": {"amount": 5}, "headers": {"X-Who": "secret-token"}}`,
			"", 200, []hit{{method: "GET", path: "/done"}}},
		{"to a private address", nil,
			`{"method": "GET", "url": "` + to("302", "http://10.0.0.1/") + `"}`, "blocked", 0, nil},
		{"to loopback", nil,
			`{"method": "GET", "url": "` + to("302", local.URL+"/x") + `"}`, "blocked", 0, nil},
		{"to another scheme", nil,
			`{"method": "GET", "url": "` + to("302", "ftp://"+hostB+"/x") + `"}`, "blocked", 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recB.mu.Lock()
			recB.hits = nil
			recB.mu.Unlock()
			ctx := context.Background()
			if tc.network != nil {
				ctx = policy.WithNetwork(ctx, tc.network)
			}
			out, err := NewRequest(Options{Transport: tr}).Call(ctx, json.RawMessage(tc.args))
			var d *tool.ErrorDetails
			switch {
			case tc.errType != "":
				if !errors.As(err, &d) || d.Type != tc.errType || !strings.Contains(d.Message, "redirect") {
					t.Errorf("err = %v, want a %s error naming the redirect", err, tc.errType)
				}
			case err != nil:
				t.Fatalf("err = %v", err)
			default:
				var r Response
				json.Unmarshal(out, &r)
				if r.Status != tc.status || r.Status == 307 && !strings.Contains(r.Location, hostB) {
					t.Errorf("response %s, want status %d", out, tc.status)
				}
			}
			if got := recB.all(); len(got) != len(tc.atB) || len(got) > 0 && got[0] != tc.atB[0] {
				t.Errorf("the other host received %+v, want %+v", got, tc.atB)
			}
		})
	}
	if got := recLocal.all(); len(got) > 0 {
		t.Errorf("the loopback server was reached: %+v", got)
	}
	// Within one origin a 307 keeps the body and the headers.
	args := `{"method": "POST", "url": "` + to("307", "http://"+hostA+"/pay") + `", "json": {"amount": 5}, "headers": {"X-Who": "me"}}`
	if _, err := NewRequest(Options{Transport: tr}).Call(context.Background(), json.RawMessage(args)); err != nil {
		t.Fatal(err)
	}
	if got := recA.all(); got[len(got)-1].body != `{"amount":5}` || got[len(got)-1].who != "me" {
		t.Errorf("a 307 within the origin received %+v", got[len(got)-1])
	}
}
