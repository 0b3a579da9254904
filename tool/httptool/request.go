package httptool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/tool"
)

type requestArgs struct {
	Method  string            `json:"method" jsonschema:"One of GET, HEAD, POST, PUT, PATCH, DELETE."`
	URL     string            `json:"url" jsonschema:"The http or https URL."`
	Headers map[string]string `json:"headers,omitempty" jsonschema:"Extra request headers."`
	JSON    any               `json:"json,omitempty" jsonschema:"A JSON body, sent as application/json."`
	Body    string            `json:"body,omitempty" jsonschema:"A text body, sent as text/plain unless a Content-Type header says otherwise."`
}

// classes are the idempotency classes of the methods http_request sends.
var classes = map[string]tool.Idempotency{
	http.MethodGet: tool.Safe, http.MethodHead: tool.Safe,
	http.MethodPut: tool.Idempotent, http.MethodDelete: tool.Idempotent,
	http.MethodPost: tool.NonIdempotent, http.MethodPatch: tool.NonIdempotent,
}

// NewRequest returns the http_request tool: GET, HEAD, POST, PUT, PATCH
// and DELETE with headers and a JSON or text body, under the caps and
// the private-network guard of http_get. Each call's class follows its
// method: GET and HEAD are safe, PUT and DELETE idempotent, POST and
// PATCH non-idempotent. The other methods send the call's idempotency
// key as the Idempotency-Key header. Only a request to a host known to
// honour it (Options.IdempotencyKeyHosts, the policy's
// network.idempotency_key_hosts) deduplicates: a resumed run sends such
// a request of unknown outcome again with its key, and pauses for
// approval on any other.
func NewRequest(o Options) tool.Tool {
	c := newClient(o)
	t := tool.Must(tool.Func("http_request",
		"Send an HTTP request (GET, HEAD, POST, PUT, PATCH or DELETE) with optional headers and a JSON or text body; "+
			"returns the status and the body (JSON or text).",
		func(ctx context.Context, a requestArgs) (*Response, error) { return c.request(ctx, a) },
		tool.WithIdempotency(tool.NonIdempotent), tool.WithTimeout(c.o.Timeout)))
	return requestTool{Tool: t, keyHosts: o.IdempotencyKeyHosts}
}

// requestTool is http_request with its class per method, and its
// deduplication per host.
type requestTool struct {
	tool.Tool
	keyHosts []string
}

// Deduplicates reports whether the call goes to a host known to keep one
// effect per Idempotency-Key: one the options or the run's policy name.
func (t requestTool) Deduplicates(ctx context.Context, args json.RawMessage) bool {
	var a struct {
		URL string `json:"url"`
	}
	if json.Unmarshal(args, &a) != nil {
		return false
	}
	u, err := url.Parse(a.URL)
	if err != nil || u.Hostname() == "" {
		return false
	}
	host := strings.ToLower(u.Hostname())
	return policy.Matches(t.keyHosts, host) || policy.NetworkFrom(ctx).KeepsIdempotencyKeys(host)
}

// Idempotency is the class of the call's method; NonIdempotent when the
// arguments cannot be read.
func (requestTool) Idempotency(args json.RawMessage) tool.Idempotency {
	var a struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(args, &a) != nil {
		return tool.NonIdempotent
	}
	if c, ok := classes[strings.ToUpper(a.Method)]; ok {
		return c
	}
	return tool.NonIdempotent
}

func (c *client) request(ctx context.Context, a requestArgs) (*Response, error) {
	method := strings.ToUpper(a.Method)
	if _, ok := classes[method]; !ok {
		return nil, tool.NewErrorDetails("invalid_arguments",
			fmt.Sprintf("method %q is not one of GET, HEAD, POST, PUT, PATCH, DELETE", a.Method), true)
	}
	var body io.Reader
	contentType := ""
	switch {
	case a.JSON != nil && a.Body != "":
		return nil, tool.NewErrorDetails("invalid_arguments", "give json or body, not both", true)
	case a.JSON != nil:
		b, err := json.Marshal(a.JSON)
		if err != nil {
			return nil, tool.NewErrorDetails("invalid_arguments", "json: "+err.Error(), true)
		}
		body, contentType = bytes.NewReader(b), "application/json"
	case a.Body != "":
		body, contentType = strings.NewReader(a.Body), "text/plain; charset=utf-8"
	}
	if body != nil && (method == http.MethodGet || method == http.MethodHead) {
		return nil, tool.NewErrorDetails("invalid_arguments", method+" requests carry no body", true)
	}
	if int64(len(a.Body)) > c.o.MaxBytes {
		return nil, tool.NewErrorDetails("invalid_arguments", fmt.Sprintf("body of %d bytes is over the %d-byte cap", len(a.Body), c.o.MaxBytes), true)
	}
	return c.do(ctx, method, a.URL, a.Headers, body, contentType)
}
