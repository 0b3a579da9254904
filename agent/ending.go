package agent

import (
	"errors"
	"maps"

	"github.com/agentry/agentry/agent/drive"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/tool"
)

// Outcome is how a run ended, in the jeeves vocabulary.
type Outcome string

// The outcomes.
const (
	OutcomeSuccess   Outcome = "success"
	OutcomeError     Outcome = "error"
	OutcomePartial   Outcome = "partial"
	OutcomeClarify   Outcome = "clarify"
	OutcomeConfirm   Outcome = "confirm"
	OutcomeReplan    Outcome = "replan"
	OutcomeLoopBack  Outcome = "loop_back"
	OutcomeTerminate Outcome = "terminate"
	OutcomeSkip      Outcome = "skip"
)

// TerminateReason says why the loop stopped.
type TerminateReason string

// The terminate reasons.
const (
	ReasonCompleted        TerminateReason = "completed"
	ReasonMaxTurns         TerminateReason = "max_turns"
	ReasonTimeout          TerminateReason = "timeout"
	ReasonAborted          TerminateReason = "aborted"
	ReasonBudgetExceeded   TerminateReason = "budget_exceeded"
	ReasonError            TerminateReason = "error"
	ReasonAwaitingApproval TerminateReason = "awaiting_approval"
)

// Error codes of Result.Error.
const (
	CodeValidation = "validation_error"
	CodeTimeout    = "timeout"
	CodeMaxTurns   = "max_turns"
	CodeToolError  = "tool_error"
	CodeLLMError   = "llm_error"
	// CodeContextTooLong is the code of a run whose transcript did not fit
	// the model's context window, compacted or not.
	CodeContextTooLong = "context_too_long"
	CodeParseError     = "parse_error"
	CodeBudgetExceeded = "budget_exceeded"
	// CodePolicyViolation is the code of a call the policy layer blocks;
	// the policy engine produces it.
	CodePolicyViolation = "policy_violation"
	CodeAborted         = "aborted"
	CodeConfigError     = "config_error"
	// CodeMemoryError is the code of a run its memory backend failed.
	CodeMemoryError = "memory_error"
	// CodeAwaitingApproval is the code of a run paused for approval.
	CodeAwaitingApproval = "awaiting_approval"
	// CodeInterrupted is the code of a run its host interrupted.
	CodeInterrupted = "interrupted"
	// CodeStoreError is the code of a run its store could not keep.
	CodeStoreError = "store_error"
	// CodeConversationBusy is the code of a run that could not join its
	// conversation: another run of it goes on (details: its run_id and
	// status).
	CodeConversationBusy = "conversation_busy"
	// CodeDiverged is the code of a resumed run that left its log.
	CodeDiverged = "diverged"
	// CodeInternal is the code of an error no row of the ending table
	// names: a host's planner or hook that failed in its own way.
	CodeInternal = "internal_error"
)

// ending is one way a run ends: its sentinel error, terminate reason,
// error code, outcome, and whether running again may help.
type ending struct {
	err         error
	reason      TerminateReason
	code        string
	outcome     Outcome
	recoverable bool
}

// endings is the one table of how runs end. A run without error is
// completed with outcome success; an error not in the table is an
// internal_error (internal).
var endings = []ending{
	{ErrMaxTurns, ReasonMaxTurns, CodeMaxTurns, OutcomePartial, true},
	{ErrTimeout, ReasonTimeout, CodeTimeout, OutcomePartial, true},
	{ErrAborted, ReasonAborted, CodeAborted, OutcomePartial, false},
	{ErrInterrupted, ReasonAborted, CodeInterrupted, OutcomePartial, true},
	{drive.ErrDispatched, ReasonAborted, CodeInterrupted, OutcomePartial, true},
	{ErrBudgetExceeded, ReasonBudgetExceeded, CodeBudgetExceeded, OutcomePartial, true},
	{ErrValidation, ReasonCompleted, CodeValidation, OutcomePartial, true},
	{ErrAwaitingApproval, ReasonAwaitingApproval, CodeAwaitingApproval, OutcomeConfirm, true},
	{store.ErrBusy, ReasonError, CodeConversationBusy, OutcomeError, true},
	{ErrStore, ReasonError, CodeStoreError, OutcomeError, true},
	{ErrMemory, ReasonError, CodeMemoryError, OutcomePartial, true},
	{ErrDiverged, ReasonError, CodeDiverged, OutcomeError, false},
	{ErrPolicyViolation, ReasonError, CodePolicyViolation, OutcomeError, false},
	{ErrInvalidInput, ReasonError, CodeValidation, OutcomeError, false},
	{ErrLowQuality, ReasonCompleted, CodeValidation, OutcomePartial, true},
	{spec.ErrInvalid, ReasonError, CodeConfigError, OutcomeError, false},
	{ErrConfig, ReasonError, CodeConfigError, OutcomeError, false},
	{ErrTool, ReasonError, CodeToolError, OutcomeError, false},
	{ErrContextTooLong, ReasonError, CodeContextTooLong, OutcomeError, false},
	{llm.ErrContextTooLong, ReasonError, CodeContextTooLong, OutcomeError, false},
	{ErrModel, ReasonError, CodeLLMError, OutcomeError, false},
}

var (
	completed = ending{reason: ReasonCompleted, outcome: OutcomeSuccess}
	internal  = ending{reason: ReasonError, code: CodeInternal, outcome: OutcomeError}
)

// endingOf classifies the error a run ended with.
func endingOf(err error) ending {
	if err == nil {
		return completed
	}
	for _, e := range endings {
		if errors.Is(err, e.err) {
			if e.err == ErrModel {
				e.recoverable = llm.KindOf(err).Retryable()
			}
			return e
		}
	}
	return internal
}

// ends reports whether err is one of the endings of the table, as a
// middleware ends a run: the run stops with it as it is.
func ends(err error) bool {
	for _, e := range endings {
		if errors.Is(err, e.err) {
			return e.err != ErrModel && e.err != ErrTool
		}
	}
	return false
}

// endError is an ending's error with the details the result reports.
type endError struct {
	err     error
	details map[string]any
}

func (e *endError) Error() string { return e.err.Error() }
func (e *endError) Unwrap() error { return e.err }

// withDetails attaches details for Result.Error.Details to err.
func withDetails(err error, details map[string]any) error {
	return &endError{err: err, details: details}
}

// detailsOf returns the details attached to err, if any.
func detailsOf(err error) map[string]any {
	var details map[string]any
	var e *endError
	if errors.As(err, &e) {
		details = e.details
	}
	if stack := panicStack(err); stack != "" && details["stack"] == nil {
		details = maps.Clone(details)
		if details == nil {
			details = map[string]any{}
		}
		details["stack"] = stack
	}
	return details
}

// panicStack is the stack of the panic behind err, when a provider or a
// tool panicked: the Result's error details carry it (redacted), for the
// person who reads why the run failed.
func panicStack(err error) string {
	var pe *llm.PanicError
	if errors.As(err, &pe) {
		return pe.Stack
	}
	var d *tool.ErrorDetails
	if errors.As(err, &d) && d.Type == "panic" {
		if s, ok := d.Details["stack"].(string); ok {
			return s
		}
	}
	return ""
}

// IsConfigError reports whether err comes from a bad spec or input rather
// than from running.
func IsConfigError(err error) bool {
	return errors.Is(err, ErrConfig) || errors.Is(err, spec.ErrInvalid) || errors.Is(err, ErrInvalidInput)
}

// IsSuccess reports whether the outcome counts as work done: success,
// partial and skip.
func (o Outcome) IsSuccess() bool {
	return o == OutcomeSuccess || o == OutcomePartial || o == OutcomeSkip
}

// IsTerminal reports whether the outcome ends a pipeline where its stage
// stands: terminate (it ended, done) and error (it failed). Clarify and
// confirm pause it, to go on once answered.
func (o Outcome) IsTerminal() bool { return o == OutcomeTerminate || o == OutcomeError }

// RequiresLoop reports whether the outcome sends a pipeline back to an
// earlier stage: replan (to its replan stage) and loop_back.
func (o Outcome) RequiresLoop() bool { return o == OutcomeReplan || o == OutcomeLoopBack }

// Valid reports whether o is one of the nine outcomes.
func (o Outcome) Valid() bool {
	switch o {
	case OutcomeSuccess, OutcomeError, OutcomePartial, OutcomeClarify, OutcomeConfirm,
		OutcomeReplan, OutcomeLoopBack, OutcomeTerminate, OutcomeSkip:
		return true
	}
	return false
}
