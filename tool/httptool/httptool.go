// Package httptool provides the HTTP tools: http_get, a bounded GET that
// returns text and JSON bodies to the model, and http_request, which also
// sends (POST, PUT, PATCH, DELETE) with the call's idempotency key. Both
// guard against requests to private and loopback addresses.
package httptool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/agentry/agentry/tool"
)

// Options configure the HTTP tools. The zero value is usable.
type Options struct {
	// Timeout bounds the whole request; default 30s.
	Timeout time.Duration
	// MaxBytes caps the body read; default 1 MiB. A longer body is cut and
	// marked truncated.
	MaxBytes int64
	// AllowPrivate permits loopback, private, link-local and unspecified
	// addresses. It is off by default so a model cannot reach the host's
	// internal network (SSRF).
	AllowPrivate bool
	// Transport replaces the default transport (tests, proxies).
	Transport http.RoundTripper
	// UserAgent is sent with each request; default "agentry".
	UserAgent string
	// IdempotencyKeyHosts (globs) are the hosts known to keep one effect
	// per Idempotency-Key (as the spec's policy.network field of that
	// name): a request of unknown outcome to one of them is sent again
	// with its key after a crash. To any other host it is not: most
	// servers ignore the header.
	IdempotencyKeyHosts []string
}

type getArgs struct {
	URL     string            `json:"url" jsonschema:"The http or https URL to fetch."`
	Headers map[string]string `json:"headers,omitempty" jsonschema:"Extra request headers."`
}

// Response is what http_get returns.
type Response struct {
	URL         string `json:"url"`
	Status      int    `json:"status"`
	ContentType string `json:"content_type,omitempty"`
	// Body is the decoded JSON value for JSON responses and a string for
	// text ones.
	Body      any  `json:"body"`
	Truncated bool `json:"truncated,omitempty"`
	// Location is where a redirect the tool did not follow points: one
	// that would send a method other than GET or HEAD, with its body, to
	// another origin.
	Location string `json:"location,omitempty"`
}

// ErrBlockedAddress is wrapped by the error of a request to an address
// the guard refuses.
var ErrBlockedAddress = errors.New("httptool: address not allowed")

// client is what both tools send with: options with defaults filled in,
// and the HTTP client (guarded unless AllowPrivate) with, beside it, the
// unguarded one for agents whose policy allows private addresses.
type client struct {
	o    Options
	http *http.Client
	open *http.Client
}

func newTransport(guarded bool) *http.Transport {
	d := &net.Dialer{Timeout: 10 * time.Second}
	if guarded {
		d.Control = guard // on the address dialled: a name that resolves inside is refused too
	}
	return &http.Transport{DialContext: d.DialContext, Proxy: nil,
		TLSHandshakeTimeout: 10 * time.Second, MaxIdleConns: 16, IdleConnTimeout: 30 * time.Second}
}

func newClient(o Options) *client {
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 1 << 20
	}
	if o.UserAgent == "" {
		o.UserAgent = "agentry"
	}
	c := &http.Client{Transport: o.Transport, Timeout: o.Timeout}
	out := &client{o: o, http: c}
	c.CheckRedirect = out.redirect
	switch {
	case c.Transport == nil:
		// Two transports, so that a connection made for an agent allowed
		// private addresses is never reused for one that is not.
		c.Transport = newTransport(!o.AllowPrivate)
		if !o.AllowPrivate {
			out.open = &http.Client{Transport: newTransport(false), Timeout: o.Timeout, CheckRedirect: out.redirect}
		}
	case !o.AllowPrivate:
		// A transport of the caller's dials as it will: the guard checks
		// what the request's host resolves to before handing it over.
		c.Transport = guardedTransport{next: c.Transport}
	}
	return out
}

// New returns the http_get tool.
func New(o Options) tool.Tool {
	c := newClient(o)
	return tool.Must(tool.Func("http_get",
		"Fetch a URL with HTTP GET and return its status and body (JSON or text).",
		func(ctx context.Context, a getArgs) (*Response, error) {
			return c.do(ctx, http.MethodGet, a.URL, a.Headers, nil, "")
		},
		tool.WithIdempotency(tool.Safe), tool.WithTimeout(c.o.Timeout)))
}

// do sends one request and reads its response within the caps.
func (c *client) do(ctx context.Context, method, rawURL string, headers map[string]string, body io.Reader, contentType string) (*Response, error) {
	o := c.o
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, tool.NewErrorDetails("invalid_arguments", fmt.Sprintf("url %q is not an absolute http(s) URL", rawURL), true)
	}
	if err := allowedHost(ctx, u, ""); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, tool.NewErrorDetails("invalid_arguments", err.Error(), true)
	}
	req.Header.Set("User-Agent", o.UserAgent)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	setTraceContext(ctx, req.Header)
	if method != http.MethodGet && method != http.MethodHead {
		// The call's key, stable across retries and resumes, lets the
		// server keep the effect of a request sent twice once. It is set
		// last: a header the model wrote cannot replace it.
		if call := tool.CallFrom(ctx); call != nil && call.Run != nil {
			req.Header.Set("Idempotency-Key", call.Key())
		}
	}
	hc := c.http
	if c.open != nil && privateAllowed(ctx) {
		hc = c.open
	}
	resp, err := hc.Do(req)
	if err != nil {
		var d *tool.ErrorDetails
		if errors.As(err, &d) { // a redirect refused
			return nil, d
		}
		if errors.Is(err, ErrBlockedAddress) {
			return nil, tool.NewErrorDetails("blocked", err.Error(), false)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, tool.Transient(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, o.MaxBytes+1))
	if err != nil {
		return nil, tool.Transient(fmt.Errorf("reading body: %w", err))
	}
	out := &Response{URL: resp.Request.URL.String(), Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type")}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		out.Location = resp.Header.Get("Location")
	}
	if int64(len(data)) > o.MaxBytes {
		data, out.Truncated = data[:o.MaxBytes], true
	}
	mt, _, _ := mime.ParseMediaType(out.ContentType)
	switch {
	case isJSON(mt) && !out.Truncated && json.Valid(data):
		out.Body = json.RawMessage(data)
	case isJSON(mt) || isText(mt) || mt == "" || len(data) == 0:
		out.Body = strings.ToValidUTF8(string(data), "\uFFFD")
	default:
		return nil, tool.NewErrorDetails("unsupported_content", fmt.Sprintf("content type %q is not text or JSON", mt), false)
	}
	return out, nil // any status: the model sees it and decides
}

func isJSON(mt string) bool {
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

func isText(mt string) bool {
	return strings.HasPrefix(mt, "text/") || mt == "application/xml" || strings.HasSuffix(mt, "+xml") ||
		mt == "application/javascript" || mt == "application/x-www-form-urlencoded"
}

// setTraceContext makes a request join the run's trace, unless the model
// gave it a traceparent of its own: as a child of the tool call's span
// when the run is traced, else of the run's trace context. Its
// tracestate is the trace's, never one the model wrote beside it.
func setTraceContext(ctx context.Context, h http.Header) {
	if h.Get("traceparent") != "" {
		return
	}
	if oteltrace.SpanContextFromContext(ctx).IsValid() {
		h.Del("tracestate")
		propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
	} else if call := tool.CallFrom(ctx); call != nil && call.Run != nil && call.Run.TraceParent != "" {
		h.Del("tracestate")
		h.Set("traceparent", call.Run.TraceParent)
		if ts := call.Run.TraceState; ts != "" {
			h.Set("tracestate", ts)
		}
	}
}
