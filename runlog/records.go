// Package runlog reads a run's log: the records a run appends to its
// store (their shapes; store.Format names the version) and Read, which
// decodes a stored log for trace, resume and replay, opening a sealed one
// with its key (Sealer). agentry writes every log through one writer of
// its own, batched, redacted and under the run's lease, so nothing
// reaches a store unredacted.
package runlog

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/tool"
)

// The records of a run's log. A change to one that a reader of an older
// log would misread is a new store.Format.

// Start opens a run's log: enough to build the agent (Spec) or the
// pipeline (Definition) again, and to start its session as it was.
type Start struct {
	Kind        string          `json:"kind"` // "agent", "pipeline" or "eval"
	RunID       string          `json:"run_id"`
	SessionID   string          `json:"session_id,omitempty"`
	ParentRunID string          `json:"parent_run_id,omitempty"`
	Spec        json.RawMessage `json:"spec,omitempty"`
	Definition  json.RawMessage `json:"definition,omitempty"`
	BaseDir     string          `json:"base_dir,omitempty"`
	AgentsDir   string          `json:"agents_dir,omitempty"`
	Model       string          `json:"model,omitempty"`
	Input       map[string]any  `json:"input"`
	UserID      string          `json:"user_id,omitempty"`
	// Roles are the roles of the principal the run started for: a run
	// resumed with no caller (one a stopped server left) goes on with them.
	Roles         []string          `json:"roles,omitempty"`
	CorrelationID string            `json:"correlation_id,omitempty"`
	TraceParent   string            `json:"trace_parent,omitempty"`
	TraceState    string            `json:"trace_state,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	StartedAt     time.Time         `json:"started_at"`
	// Seed and FixedClock are a deterministic run's (agent.WithSeed,
	// WithNow): its resume and replay keep them.
	Seed       *int64 `json:"seed,omitempty"`
	FixedClock bool   `json:"fixed_clock,omitempty"`
	// Images are the run's task images (agent.WithImages).
	Images []llm.Image `json:"images,omitempty"`
	// Instructions are a caller's, for this run (agent.WithInstructions).
	Instructions string `json:"instructions,omitempty"`
	// Memory is what recall put into the system prompt, for a resume to
	// put it back as it was (sealed when the memory is).
	Memory string `json:"memory,omitempty"`
	// Conversation is the conversation the run is part of, and History
	// the messages of it the run started from (after the system prompt
	// and the spec's messages, before the task), as its model was sent
	// them: a resume and a replay put them back as they were.
	Conversation string        `json:"conversation,omitempty"`
	History      []llm.Message `json:"history,omitempty"`
	// HistoryAttempts is how many model attempts the conversation's runs
	// made before this one: where a scripted model stands in its script.
	HistoryAttempts int `json:"history_attempts,omitempty"`
	// HistoryOf is the run whose history this one started from (the one
	// before it in its conversation); "" for none.
	HistoryOf string `json:"history_of,omitempty"`
	// Driver names what drives the run when it is not one process (a
	// Temporal workflow, "temporal:NAMESPACE/WORKFLOW_ID"): only a
	// session of the same driver may resume it (drive.Plan.Driver).
	Driver string `json:"driver,omitempty"`
}

// ModelCall is one model call: what was asked (as a digest) and the
// whole answer.
type ModelCall struct {
	N          int         `json:"n"`
	Agent      string      `json:"agent,omitempty"`
	Digest     string      `json:"digest"`
	Response   *Response   `json:"response,omitempty"`
	Error      *ModelError `json:"error,omitempty"`
	Attempts   int         `json:"attempts"`
	DurationMS float64     `json:"duration_ms"`
}

// Response is an llm.Response as the log keeps it: tool call arguments
// as the model wrote them, byte for byte (JSON encoding would compact
// them, and the replayed transcript would differ from the original).
type Response struct {
	Content      string     `json:"content,omitempty"`
	ToolCalls    []ToolCall `json:"tool_calls,omitempty"`
	Usage        llm.Usage  `json:"usage"`
	Model        string     `json:"model,omitempty"`
	Provider     string     `json:"provider,omitempty"`
	FinishReason string     `json:"finish_reason,omitempty"`
}

// ToolCall is a tool call the model asked for, as the log keeps it.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Signature []byte `json:"signature,omitempty"`
}

// LLM is the recorded response as the provider gave it, decoded anew
// for each caller, which may keep it.
func (r *Response) LLM() *llm.Response {
	out := &llm.Response{Content: r.Content, Usage: r.Usage, Model: r.Model, Provider: r.Provider, FinishReason: r.FinishReason}
	for _, c := range r.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, llm.ToolCall{ID: c.ID, Name: c.Name, Arguments: json.RawMessage(c.Arguments), Signature: c.Signature})
	}
	return out
}

// ModelError is a model call that failed.
type ModelError struct {
	Kind    string `json:"kind"`
	Status  int    `json:"status,omitempty"`
	Message string `json:"message"`
}

// Intent is a tool call about to run: committed before a non-idempotent
// call runs, so that a resume knows it may have taken effect.
type Intent struct {
	CallID       string           `json:"call_id"`
	Tool         string           `json:"tool"`
	Arguments    string           `json:"arguments"`
	Idempotency  tool.Idempotency `json:"idempotency"`
	Deduplicates bool             `json:"deduplicates,omitempty"`
}

// ToolResult is a finished tool call. Arguments and Output are strings:
// the bytes the model and the tool wrote, which JSON encoding would
// compact.
type ToolResult struct {
	CallID      string             `json:"call_id"`
	Tool        string             `json:"tool"`
	Arguments   string             `json:"arguments"`
	Output      *string            `json:"output,omitempty"`
	Observation string             `json:"observation,omitempty"`
	Error       *tool.ErrorDetails `json:"error,omitempty"`
	Attempts    int                `json:"attempts,omitempty"`
	DurationMS  float64            `json:"duration_ms"`
	StartedAt   time.Time          `json:"started_at"`
}

// Result is the recorded result as the handler returned it.
func (res *ToolResult) Result() (tool.Output, error) {
	if res.Error != nil {
		d := *res.Error
		return tool.Output{}, &d
	}
	out := tool.Output{Observation: res.Observation}
	if res.Output != nil {
		out.JSON = json.RawMessage(*res.Output)
	}
	return out, nil
}

// Resume marks where a resumed run took over: the events of turns from
// Turn on that were written before it are superseded. Approved and
// Denied are the idempotency keys of the calls the resume decided.
type Resume struct {
	Turn     int      `json:"turn"`
	Holder   string   `json:"holder"`
	Model    string   `json:"model,omitempty"`
	Approved []string `json:"approved,omitempty"`
	Denied   []string `json:"denied,omitempty"`
	// Reason is why the calls were denied, when a person said.
	Reason string `json:"reason,omitempty"`
	// Dispatched says the run went on after its calls ran elsewhere
	// (drive.Plan.Dispatch): the way it runs, not a resume.
	Dispatched bool `json:"dispatched,omitempty"`
}

// Approval is a call that waits for a person's approval.
type Approval struct {
	CallID    string `json:"call_id"`
	Tool      string `json:"tool"`
	Arguments string `json:"arguments"`
	Rule      string `json:"rule"`
}

// History is a conversation run's history as it ended (store.KindHistory):
// the messages the next run of its conversation starts from, its own
// among them (its task, its tool calls and results, its answer).
type History struct {
	Messages []llm.Message `json:"messages"`
	// Attempts is how many model attempts the conversation's runs made
	// up to this one's end: where a scripted model stands in its script
	// when the next run begins, in whatever process.
	Attempts int `json:"attempts,omitempty"`
}

// Exchange is what a run of a conversation was told and what it answered,
// as a chat shows it.
type Exchange struct {
	// Message is what was said: the text of an input of one text (a
	// message), else the input.
	Message any `json:"message"`
	// Answer is the run's result, once it has one; Error why it failed.
	Answer any    `json:"answer,omitempty"`
	Error  string `json:"error,omitempty"`
}

// MessageOf is what a person said, from the input a message became: the
// text of an input of one text, else the input.
func MessageOf(input map[string]any) any {
	if len(input) == 1 {
		for _, v := range input {
			if text, ok := v.(string); ok {
				return text
			}
		}
	}
	return input
}

// ReadExchange is what run runID was told and answered, read from its
// start and result records alone: a chat of many runs shows each without
// decoding the rest of its log (its history, its calls, its events).
func ReadExchange(ctx context.Context, st store.Store, runID string, opts ...Option) (Exchange, error) {
	var c config
	for _, o := range opts {
		o(&c)
	}
	var recs []store.Record
	var err error
	if kr, ok := st.(store.KindReader); ok {
		recs, err = kr.RecordsOf(ctx, runID, store.KindStart, store.KindResult)
	} else {
		recs, err = st.Records(ctx, runID, 0)
	}
	if err != nil {
		return Exchange{}, err
	}
	var start, result *store.Record
	for i := range recs {
		switch recs[i].Kind {
		case store.KindStart:
			start = cmp.Or(start, &recs[i])
		case store.KindResult:
			result = &recs[i] // a resumed run's last is its Result
		}
	}
	if start == nil {
		return Exchange{}, fmt.Errorf("run %s: its log has no start record", runID)
	}
	if err := OpenRecord(c.seal, runID, start); err != nil {
		return Exchange{}, fmt.Errorf("run %s: %w", runID, err)
	}
	// The start record's input comes before its history, and a Result's
	// answer and error before its transcript: read up to them only.
	var input map[string]any
	if err := leading(start.Data, map[string]any{"input": &input}, ""); err != nil {
		return Exchange{}, fmt.Errorf("run %s: record %d (start): %w", runID, start.Seq, err)
	}
	x := Exchange{Message: MessageOf(input)}
	if result == nil {
		return x, nil
	}
	if err := OpenRecord(c.seal, runID, result); err != nil {
		return Exchange{}, fmt.Errorf("run %s: %w", runID, err)
	}
	var failed *struct {
		Message string `json:"message"`
	}
	if err := leading(result.Data, map[string]any{"result": &x.Answer, "error": &failed}, "started_at"); err != nil {
		return Exchange{}, fmt.Errorf("run %s: record %d (result): %w", runID, result.Seq, err)
	}
	if failed != nil {
		x.Error = failed.Message
	}
	return x, nil
}

// leading decodes the keys of the JSON object data that want names into
// their targets, reading no further than the last of them, or than the
// key stop ("" for none: an omitted key is then looked for to the end).
func leading(data []byte, want map[string]any, stop string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("not a JSON object")
	}
	for left := len(want); left > 0 && dec.More(); {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := t.(string)
		if key == stop {
			return nil
		}
		into, ok := want[key]
		if !ok {
			var skip json.RawMessage
			into = &skip
		} else {
			left--
		}
		if err := dec.Decode(into); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	return nil
}
