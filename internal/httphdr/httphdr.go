// Package httphdr adds fixed headers to every request of an HTTP client:
// the credentials a spec gives for a remote server.
package httphdr

import "net/http"

// Transport adds Header to each request it sends through Base (nil:
// http.DefaultTransport), on a copy of the request.
type Transport struct {
	Base   http.RoundTripper
	Header http.Header
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if len(t.Header) == 0 {
		return base.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	for k, v := range t.Header {
		req.Header[k] = v
	}
	return base.RoundTrip(req)
}
