package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Status is the outcome of one tool call.
type Status string

// The statuses of a StandardToolResult.
const (
	StatusSuccess Status = "success"
	StatusError   Status = "error"
)

// ParseStatus returns the Status named s.
func ParseStatus(s string) (Status, error) {
	switch Status(s) {
	case StatusSuccess, StatusError:
		return Status(s), nil
	}
	return "", fmt.Errorf("tool: unknown status %q (want success or error)", s)
}

// Result is the StandardToolResult: one uniform shape for what any tool
// call produced, successful or not.
type Result struct {
	Status  Status         `json:"status"`
	Data    map[string]any `json:"data,omitempty"`
	Error   *ErrorDetails  `json:"error,omitempty"`
	Message string         `json:"message,omitempty"`
}

// Success returns a successful result.
func Success(data map[string]any, message string) *Result {
	return &Result{Status: StatusSuccess, Data: data, Message: message}
}

// Failure returns a failed result.
func Failure(e *ErrorDetails, message string) *Result {
	return &Result{Status: StatusError, Error: e, Message: message}
}

// Validate checks the cross-field rules: a success has no error, a failure
// has one with a type and a message.
func (r *Result) Validate() error {
	switch r.Status {
	case StatusSuccess:
		if r.Error != nil {
			return errors.New("tool result: status success with an error")
		}
	case StatusError:
		if r.Error == nil {
			return errors.New("tool result: status error without error details")
		}
		if r.Error.Type == "" || r.Error.Message == "" {
			return errors.New("tool result: error details need a type and a message")
		}
	default:
		return fmt.Errorf("tool result: unknown status %q", r.Status)
	}
	return nil
}

// ErrorDetails describes a failed call. It is an error, so a tool can
// return one to say exactly what went wrong.
type ErrorDetails struct {
	// Type is a short snake_case class: "invalid_arguments", "not_found",
	// "timeout", "panic", "unknown_tool", ...
	Type    string         `json:"type"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
	// Recoverable says whether the model can do something about it (fix the
	// arguments, try later) as opposed to a failure that will not change.
	Recoverable bool `json:"recoverable"`
}

// Error returns "type: message".
func (e *ErrorDetails) Error() string { return e.Type + ": " + e.Message }

// NewErrorDetails returns error details of the given type.
func NewErrorDetails(errorType, message string, recoverable bool) *ErrorDetails {
	return &ErrorDetails{Type: errorType, Message: message, Recoverable: recoverable}
}

// NotFound returns the details of a missing entity.
func NotFound(entity, identifier string) *ErrorDetails {
	return &ErrorDetails{Type: "not_found", Message: fmt.Sprintf("%s %q not found", entity, identifier),
		Details: map[string]any{"entity": entity, "identifier": identifier}, Recoverable: true}
}

// Transient wraps err so that it counts as transient.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrTransient, err)
}

// DetailsFrom turns any error into ErrorDetails: an *ErrorDetails in the
// chain is returned as it is; timeouts, cancellation and transient errors
// get their own types; anything else is "tool_error".
func DetailsFrom(err error, recoverable bool) *ErrorDetails {
	var d *ErrorDetails
	switch {
	case errors.As(err, &d):
		return d
	case errors.Is(err, context.DeadlineExceeded):
		return &ErrorDetails{Type: "timeout", Message: err.Error(), Recoverable: true}
	case errors.Is(err, context.Canceled):
		return &ErrorDetails{Type: "cancelled", Message: err.Error(), Recoverable: false}
	case errors.Is(err, ErrTransient):
		return &ErrorDetails{Type: "transient", Message: err.Error(), Recoverable: true}
	}
	return &ErrorDetails{Type: "tool_error", Message: err.Error(), Recoverable: recoverable}
}

// Normalize turns whatever a tool produced into a StandardToolResult:
// a *Result or Result as it is (validated); an error as a failure; a map
// with a "status" key as a result in JSON form; JSON bytes decoded first;
// any other value as the data of a success (a map as it is, anything else
// under the key "result").
func Normalize(v any) (*Result, error) {
	switch x := v.(type) {
	case nil:
		return Success(nil, ""), nil
	case *Result:
		if x == nil {
			return Success(nil, ""), nil
		}
		return x, x.Validate()
	case Result:
		return &x, x.Validate()
	case error:
		return Failure(DetailsFrom(x, false), ""), nil
	case json.RawMessage:
		return normalizeJSON(x)
	case []byte:
		return normalizeJSON(x)
	case map[string]any:
		if _, ok := x["status"]; ok {
			return fromMap(x)
		}
		return Success(x, ""), nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("tool result: %w", err)
	}
	return normalizeJSON(data)
}

func normalizeJSON(data []byte) (*Result, error) {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("tool result: not JSON: %w", err)
	}
	if m, ok := v.(map[string]any); ok {
		if _, ok := m["status"]; ok {
			return fromMap(m)
		}
		return Success(m, ""), nil
	}
	return Success(map[string]any{"result": v}, ""), nil
}

func fromMap(m map[string]any) (*Result, error) {
	data, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("tool result: %w", err)
	}
	var r Result
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("tool result: %w", err)
	}
	if _, err := ParseStatus(string(r.Status)); err != nil {
		return nil, err
	}
	return &r, r.Validate()
}
