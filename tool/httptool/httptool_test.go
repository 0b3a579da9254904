package httptool

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentry/agentry/tool"
)

func server() *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"release": "1.2.0", "agent": "` + r.Header.Get("X-Who") + `"}`))
	})
	mux.HandleFunc("/text", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte(strings.Repeat("abcdefghij", 10)))
	})
	mux.HandleFunc("/png", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte{0x89, 'P', 'N', 'G'})
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, _ *http.Request) { http.NotFound(w, nil) })
	return httptest.NewServer(mux)
}

func call(t *testing.T, tl tool.Tool, args string) (*Response, error) {
	t.Helper()
	out, err := tl.Call(context.Background(), json.RawMessage(args))
	if err != nil {
		return nil, err
	}
	var r Response
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("output %s: %v", out, err)
	}
	return &r, nil
}

func TestGet(t *testing.T) {
	srv := server()
	defer srv.Close()
	tl := New(Options{AllowPrivate: true, MaxBytes: 50})
	r, err := call(t, tl, `{"url": "`+srv.URL+`/json", "headers": {"X-Who": "agentry"}}`)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := r.Body.(map[string]any)
	if r.Status != 200 || body["release"] != "1.2.0" || body["agent"] != "agentry" {
		t.Errorf("json: %+v", r)
	}
	r, err = call(t, tl, `{"url": "`+srv.URL+`/text"}`)
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := r.Body.(string); len(s) != 50 || !r.Truncated {
		t.Errorf("text: %d bytes, truncated %v", len(s), r.Truncated)
	}
	r, err = call(t, tl, `{"url": "`+srv.URL+`/missing"}`)
	if err != nil || r.Status != 404 {
		t.Errorf("404: %+v %v", r, err)
	}
	var d *tool.ErrorDetails
	if _, err := call(t, tl, `{"url": "`+srv.URL+`/png"}`); !errors.As(err, &d) || d.Type != "unsupported_content" {
		t.Errorf("png: %v", err)
	}
	if _, err := call(t, tl, `{"url": "ftp://example.com/x"}`); !errors.As(err, &d) || d.Type != "invalid_arguments" {
		t.Errorf("ftp: %v", err)
	}
}

func TestGuardBlocksLoopbackByDefault(t *testing.T) {
	srv := server()
	defer srv.Close()
	_, err := call(t, New(Options{}), `{"url": "`+srv.URL+`/json"}`)
	var d *tool.ErrorDetails
	if !errors.As(err, &d) || d.Type != "blocked" || !strings.Contains(d.Message, "127.0.0.1") {
		t.Fatalf("err = %v, want the loopback address blocked", err)
	}
	for _, addr := range []string{"10.0.0.1:80", "192.168.1.1:80", "[::1]:80", "169.254.169.254:80", "0.0.0.0:80"} {
		if err := guard("tcp", addr, nil); !errors.Is(err, ErrBlockedAddress) {
			t.Errorf("guard(%s) = %v", addr, err)
		}
	}
	if err := guard("tcp", "93.184.216.34:443", nil); err != nil {
		t.Errorf("guard(public) = %v", err)
	}
	if New(Options{}).Info().Idempotency != tool.Safe {
		t.Error("http_get is not safe")
	}
}
