package agent

import (
	"fmt"
	"maps"
	"time"

	"github.com/agentry/agentry/llm"
)

// runNotes are what a run adds to its Result beside the trace: warnings,
// the retries of its model calls, what its tools attached.
type runNotes struct {
	warnings       []string
	retries        int
	lastRetryError string
	attachments    map[string]string
	denials        []denial       // what the access rules refused as the run began
	fellFor        time.Duration  // how long the model call in flight tried the models it gave up on
	scratch        map[string]any // Turn.Scratch
	rememberedAt   int            // the turn of the Turn.Remember calls counted in remembered
	remembered     int
	history        []llm.Message // the conversation's history the run started from
	historyLen     int           // how many messages of the transcript are that history now
	historyCalls   int           // the model attempts of the conversation's runs before this one
	historyClean   bool          // the history came through the store's redaction
	historyOf      string        // the run whose history it is (store.Run.HistoryOf)
}

// note is the run's notes, made when something first adds to them.
func (r *run) note() *runNotes {
	if r.notes == nil {
		r.notes = &runNotes{}
	}
	return r.notes
}

// warn adds a warning for the Result's diagnostics.
func (r *run) warn(format string, args ...any) {
	n := r.note()
	n.warnings = append(n.warnings, fmt.Sprintf(format, args...))
}

// attach keeps what a tool call attached.
func (r *run) attach(a map[string]string) {
	if len(a) == 0 {
		return
	}
	n := r.note()
	if n.attachments == nil {
		n.attachments = map[string]string{}
	}
	maps.Copy(n.attachments, a)
}

// addNotes puts the notes in res (redacted by redactResult after).
func (r *run) addNotes(res *Result) {
	n := r.notes
	if n == nil {
		return
	}
	if len(n.warnings) > 0 {
		res.Diagnostics = &Diagnostics{Warnings: n.warnings}
	}
	if n.retries > 0 {
		res.RetryInfo = &RetryInfo{Attempts: n.retries, LastError: n.lastRetryError}
	}
	res.Attachments = n.attachments
}
