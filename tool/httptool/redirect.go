package httptool

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/tool"
)

// maxRedirects is how many hops a request follows, as net/http's default.
const maxRedirects = 10

// allowedHost refuses a host outside the policy's allow_hosts; hop
// names the redirect that led there, if one did.
func allowedHost(ctx context.Context, u *url.URL, hop string) error {
	n := policy.NetworkFrom(ctx)
	if n.AllowsHost(u.Hostname()) {
		return nil
	}
	return tool.NewErrorDetails("policy_violation",
		fmt.Sprintf("%shost %s is not among the hosts the policy allows (policy.network.allow_hosts: %s)", hop, u.Hostname(),
			strings.Join(n.AllowHosts, ", ")), false)
}

// redirect is the clients' CheckRedirect: every hop passes the checks
// the first request passed (scheme, allow_hosts, the private-address
// guard), and a hop to another origin carries none of the headers the
// model wrote. A hop that would send a method other than GET or HEAD to
// another origin (a 307 or 308 of a POST) is not followed: the model
// gets the redirect, with its Location, and decides.
func (c *client) redirect(req *http.Request, via []*http.Request) error {
	ctx := req.Context()
	hop := fmt.Sprintf("a redirect from %s: ", via[len(via)-1].URL.Redacted())
	if len(via) >= maxRedirects {
		return tool.NewErrorDetails("too_many_redirects", fmt.Sprintf("%sstopped after %d redirects", hop, maxRedirects), false)
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return tool.NewErrorDetails("blocked", fmt.Sprintf("%s%s is not an http(s) URL", hop, req.URL.Redacted()), false)
	}
	if err := allowedHost(ctx, req.URL, hop); err != nil {
		return err
	}
	if !c.o.AllowPrivate && !privateAllowed(ctx) {
		if err := checkHost(ctx, req.URL.Hostname()); err != nil {
			return tool.NewErrorDetails("blocked", hop+err.Error(), false)
		}
	}
	if origin(req.URL) == origin(via[0].URL) {
		return nil
	}
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		return http.ErrUseLastResponse
	}
	h := http.Header{"User-Agent": {c.o.UserAgent}}
	for _, k := range []string{"traceparent", "tracestate"} {
		if v := via[0].Header.Get(k); v != "" {
			h.Set(k, v) // the trace context is no secret: it follows the request
		}
	}
	req.Header = h
	return nil
}

// origin is a URL's scheme, host and port: where headers may go again.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return u.Scheme + "://" + strings.ToLower(u.Hostname()) + ":" + port
}
