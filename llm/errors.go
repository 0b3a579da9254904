package llm

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Kind classifies a model-call failure so callers can decide what to do
// without knowing the vendor.
type Kind int

// The kinds of model-call failure.
const (
	KindUnknown Kind = iota
	// KindRateLimited: the provider asked us to slow down (HTTP 429).
	KindRateLimited
	// KindTransient: a failure that may pass on retry (5xx, network,
	// broken stream, per-call timeout).
	KindTransient
	// KindOverloaded: the provider is over capacity (HTTP 503, 529).
	KindOverloaded
	// KindInvalidRequest: the request is wrong and will stay wrong (400, 422).
	KindInvalidRequest
	// KindAuth: missing or refused credentials (401, 403).
	KindAuth
	// KindNotFound: no such model or endpoint (404).
	KindNotFound
	// KindContextTooLong: the prompt exceeds the model's context window.
	KindContextTooLong
	// KindContentFiltered: the provider refused the content.
	KindContentFiltered
)

var kindNames = [...]string{
	KindUnknown:         "unknown",
	KindRateLimited:     "rate_limited",
	KindTransient:       "transient",
	KindOverloaded:      "overloaded",
	KindInvalidRequest:  "invalid_request",
	KindAuth:            "auth",
	KindNotFound:        "not_found",
	KindContextTooLong:  "context_too_long",
	KindContentFiltered: "content_filtered",
}

// String returns the kind's snake_case name.
func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// ParseKind returns the Kind named s ("rate_limited", ...).
func ParseKind(s string) (Kind, bool) {
	for k, n := range kindNames {
		if n == s {
			return Kind(k), true
		}
	}
	return KindUnknown, false
}

// Retryable reports whether a call that failed with this kind may succeed
// when repeated.
func (k Kind) Retryable() bool {
	return k == KindRateLimited || k == KindTransient || k == KindOverloaded
}

// Sentinel errors, one per kind, for errors.Is:
//
//	if errors.Is(err, llm.ErrRateLimited) { ... }
var (
	ErrRateLimited     = &kindError{KindRateLimited}
	ErrTransient       = &kindError{KindTransient}
	ErrOverloaded      = &kindError{KindOverloaded}
	ErrInvalidRequest  = &kindError{KindInvalidRequest}
	ErrAuth            = &kindError{KindAuth}
	ErrNotFound        = &kindError{KindNotFound}
	ErrContextTooLong  = &kindError{KindContextTooLong}
	ErrContentFiltered = &kindError{KindContentFiltered}
	// ErrUnknownProvider is returned by Open for a provider that is not
	// registered.
	ErrUnknownProvider = errors.New("llm: unknown provider")
	// ErrNoCandidate is wrapped by the error of a request no candidate can serve.
	ErrNoCandidate = errors.New("llm: no model can serve the request")
)

type kindError struct{ k Kind }

func (e *kindError) Error() string { return "llm: " + e.k.String() }

// APIError is a failed model call. Every provider returns its failures as
// an *APIError so errors.As and errors.Is work whatever the vendor.
type APIError struct {
	Kind     Kind
	Provider string
	Model    string
	// Status is the HTTP status, or 0 when there was none.
	Status int
	// Message is the provider's own error text. It never holds credentials.
	Message string
	// RetryAfter is the wait the provider asked for, or 0.
	RetryAfter time.Duration
	// Err is the underlying error, if any.
	Err error
}

func (e *APIError) Error() string {
	s := "llm"
	if e.Provider != "" {
		s += " " + e.Provider
	}
	if e.Model != "" {
		s += " model " + e.Model
	}
	s += ": " + e.Kind.String()
	if e.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	if e.Message != "" {
		s += ": " + e.Message
	} else if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying error.
func (e *APIError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, llm.ErrRateLimited) (and the other kind
// sentinels) match an APIError of that kind.
func (e *APIError) Is(target error) bool {
	if k, ok := target.(*kindError); ok {
		return k.k == e.Kind
	}
	return false
}

// KindForStatus maps an HTTP status to the kind vendors mean by it.
func KindForStatus(status int) Kind {
	switch {
	case status == http.StatusTooManyRequests:
		return KindRateLimited
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return KindAuth
	case status == http.StatusNotFound:
		return KindNotFound
	case status == http.StatusRequestEntityTooLarge:
		return KindContextTooLong
	case status == http.StatusServiceUnavailable || status == 529:
		return KindOverloaded
	case status == http.StatusRequestTimeout || status == http.StatusConflict || status >= 500:
		return KindTransient
	case status >= 400:
		return KindInvalidRequest
	}
	return KindUnknown
}

// KindOf returns the kind of err: the Kind of an *APIError in its chain,
// KindTransient for a per-call deadline that is not the caller's, or
// KindUnknown.
func KindOf(err error) Kind {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Kind
	}
	return KindUnknown
}

// RetryAfterOf returns the wait an error asks for, or 0.
func RetryAfterOf(err error) time.Duration {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.RetryAfter
	}
	return 0
}

// ParseRetryAfter reads the wait a response asks for: the retry-after-ms
// header (milliseconds), else Retry-After in seconds or as an HTTP date.
// It returns 0 when there is none.
func ParseRetryAfter(h http.Header) time.Duration {
	if h == nil {
		return 0
	}
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// TransportError describes a failure to reach a provider (network, TLS, a
// broken connection) as a transient *APIError. The message leaves out the
// request URL, which some servers put credentials in.
func TransportError(provider, model string, err error) *APIError {
	msg := err.Error()
	var ne net.Error
	var oe *net.OpError
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		msg = "network timeout"
	case errors.As(err, &oe):
		msg = oe.Op + ": " + oe.Err.Error()
	default:
		if i := strings.LastIndex(msg, ": "); i >= 0 && strings.Contains(msg[:i], "://") {
			msg = msg[i+2:]
		}
	}
	return &APIError{Kind: KindTransient, Provider: provider, Model: model, Message: msg}
}

// StreamError marks a failure that ended a stream: one the provider's API
// did not report itself (no HTTP status) is a broken stream, and says so.
func StreamError(err error) error {
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == 0 && !strings.HasPrefix(ae.Message, "stream broken: ") {
		ae.Message = "stream broken: " + ae.Message
	}
	return err
}
