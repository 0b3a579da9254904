package eval

import "errors"

// Errors of the package, matched with errors.Is.
var (
	// ErrInvalid is what errors.Is finds in an *Error.
	ErrInvalid = errors.New("invalid dataset")
	// ErrNoStore is returned by Run without Options.Store.
	ErrNoStore = errors.New("eval: an evaluation needs a run store")
	// ErrNotEvaluation is returned for an id that names a run, not an
	// evaluation.
	ErrNotEvaluation = errors.New("eval: not an evaluation")
)
