package spec

import "errors"

// Errors of the package, matched with errors.Is.
var (
	// ErrUnknownAgent is returned for a reference no spec file answers.
	ErrUnknownAgent = errors.New("unknown agent")
	// ErrSchemaChanged is matched by the error of a version whose output
	// schema changed in place: a changed schema needs a new version.
	ErrSchemaChanged = errors.New("output_schema changed in place")
	// ErrInvalid is matched by every *Error: errors.Is(err, ErrInvalid).
	ErrInvalid = errors.New("invalid agent spec")
)
