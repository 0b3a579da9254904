package tool

import "errors"

// Errors of the package, matched with errors.Is.
var (
	// ErrTransient marks a failure that may pass if the call is repeated.
	// Wrap it (or use Transient) so that Invoke retries safe and idempotent
	// tools.
	ErrTransient = errors.New("transient failure")
	// ErrDuplicate is returned when a registry already holds a tool of that name.
	ErrDuplicate = errors.New("tool: duplicate name")
	// ErrInvalidName is returned for a tool name that models cannot call.
	ErrInvalidName = errors.New("tool: invalid name")
)
