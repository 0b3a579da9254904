package agent

import (
	"errors"

	"github.com/agentry/agentry/internal/journal"
)

// The errors a run can end with, matched with errors.Is on the error Run
// returns. A failed model call also matches *llm.APIError with errors.As.
var (
	ErrMaxTurns       = errors.New("max turns reached")
	ErrTimeout        = errors.New("run timed out")
	ErrAborted        = errors.New("run aborted")
	ErrBudgetExceeded = errors.New("budget exceeded")
	ErrModel          = errors.New("model call failed")
	ErrTool           = errors.New("tool failed")
	ErrValidation     = errors.New("output does not match the output schema")
	ErrConfig         = errors.New("configuration error")
	ErrInvalidInput   = errors.New("invalid input")
	// ErrAwaitingApproval is matched by the error of a run paused until a
	// person approves or denies a call (see ApprovalError).
	ErrAwaitingApproval = errors.New("run awaits approval")
	// ErrInterrupted is matched by the error of a run its host stopped
	// with Session.Interrupt: its log is kept unended, and the store
	// reports it interrupted, for Resume to finish.
	ErrInterrupted = errors.New("run interrupted")

	// ErrContextTooLong is matched by the error of a run whose transcript did
	// not fit the model's context window even compacted (or with compaction
	// off); the provider's own error is matched with llm.ErrContextTooLong.
	ErrContextTooLong = errors.New("the transcript does not fit the model's context window")

	// ErrLowQuality is matched by the error of a run whose answer came with a
	// confidence below the quality its input required.
	ErrLowQuality = errors.New("confidence below the required quality")

	// ErrNotResumable is matched by the error of resuming a run that ended
	// (completed, failed or aborted) or that another process drives. It is
	// journal.ErrNotResumable.
	ErrNotResumable = journal.ErrNotResumable

	// ErrNoSuchCall is matched by the error of approving or denying a call
	// that does not wait for a decision, or a call id that names more than
	// one waiting call.
	ErrNoSuchCall = errors.New("agent: no call waits for a decision by that id")

	// ErrStore is matched by the error of a run that could not be kept
	// durable: its store failed, or another process took the run over. It is
	// journal.ErrStore.
	ErrStore = journal.ErrStore

	// ErrDiverged is matched by the error of a resumed run whose replay
	// asked something its log does not hold: the spec, the tools or the
	// prompts changed since it was recorded.
	ErrDiverged = errors.New("run diverged from its log")

	// ErrVersionChanged is matched by the error of a run refused because its
	// agent's output schema differs from the one the store pinned for the
	// same NAME@VERSION.
	ErrVersionChanged = errors.New("agent version changed in place")

	// ErrMemory is matched by the error of a run whose memory could not be
	// read or written (code memory_error).
	ErrMemory = errors.New("memory failed")

	// ErrPolicyViolation is matched by the error of a run whose answer a
	// content filter on the output blocked.
	ErrPolicyViolation = errors.New("policy violation")

	// ErrNotRegistered is matched by the error of a lookup of an agent a
	// Registry does not hold.
	ErrNotRegistered = errors.New("agent: not registered")

	// ErrRegistered is matched by the error of registering a second agent
	// with a name and version already taken.
	ErrRegistered = errors.New("agent: already registered")

	// ErrStopped is returned by a Service that has been stopped.
	ErrStopped = errors.New("agent: service stopped")

	// ErrUnknownSession is returned by Service.Abort for an id it does not know.
	ErrUnknownSession = errors.New("agent: unknown session")

	// ErrNoStore is returned by the Service methods that need a store when
	// it has none (see StoreRuns).
	ErrNoStore = errors.New("agent: the service has no run store")

	// ErrSessionUsed is returned by Run on a session that has already run.
	ErrSessionUsed = errors.New("agent: session has already run")
)
