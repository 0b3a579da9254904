// Package scripted is the offline model provider: it plays a script of
// model turns, one per call, so runs are deterministic and cost nothing.
// It is the model of the quickstart and of agentry's own tests.
//
// The script file format:
//
//	{"model": "gpt-4.1-mini",
//	 "turns": [
//	   {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}],
//	    "usage": {"prompt_tokens": 12, "completion_tokens": 5}},
//	   {"error": {"status": 429, "message": "slow down", "retry_after_ms": 20}},
//	   {"content": "The answer is 3.", "delay_ms": 5}
//	 ]}
//
// Turns are played in order, one per model call; an error turn consumes a
// call, so a retry sees the next turn. Calling past the last turn is an
// error that says so. The optional "model" names the model the turns were
// recorded from, so that a replayed run is priced like the original.
//
// Importing the package registers the "scripted" provider with llm.Open:
// the model name "scripted:PATH" plays the file at PATH.
package scripted

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/agentry/agentry/llm"
)

// FormatVersion is written by Script.Marshal in the "format" field.
const FormatVersion = "agentry.scripted/v1"

// File is the JSON form of a script.
type File struct {
	Format string `json:"format,omitempty"`
	// Model names the model the turns come from; it prices the replay.
	Model string `json:"model,omitempty"`
	Turns []Turn `json:"turns"`
}

// Turn is one model reply, or one failure.
type Turn struct {
	Content   string     `json:"content,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	Usage     *llm.Usage `json:"usage,omitempty"`
	Error     *Error     `json:"error,omitempty"`
	// DelayMS makes the call take this long (or until its context ends).
	DelayMS int `json:"delay_ms,omitempty"`
	// ChunkDelayMS makes a streamed reply wait this long before each of
	// its pieces after the first: an answer written as a model writes it.
	ChunkDelayMS int `json:"chunk_delay_ms,omitempty"`
}

// ToolCall is a tool call of a scripted turn. ID may be omitted: it is then
// "call_T_I" for turn T and call I.
//
// Arguments are the JSON object the model writes: in a script read from
// JSON, its bytes as written (a json.RawMessage); in a script written in
// Go, any value that encodes to one (a map, a struct, or JSON bytes).
type ToolCall struct {
	ID        string `json:"id,omitempty"`
	Name      string `json:"name"`
	Arguments any    `json:"arguments,omitempty"`
}

// UnmarshalJSON keeps the arguments' bytes as written, and refuses an
// unknown field as a script does.
func (c *ToolCall) UnmarshalJSON(b []byte) error {
	var raw struct {
		ID        string          `json:"id,omitempty"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments,omitempty"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	c.ID, c.Name, c.Arguments = raw.ID, raw.Name, nil
	if raw.Arguments != nil {
		c.Arguments = raw.Arguments
	}
	return nil
}

// arguments are the call's arguments as JSON bytes.
func (c *ToolCall) arguments() (json.RawMessage, error) {
	switch a := c.Arguments.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return a, nil
	case []byte:
		return a, nil
	}
	return json.Marshal(c.Arguments)
}

// New builds a script from turns written in Go; name identifies it in
// errors.
func New(name string, turns ...Turn) (*Script, error) {
	return FromFile(name, &File{Turns: append([]Turn{}, turns...)})
}

// Error is a scripted failure.
type Error struct {
	// Status is an HTTP status; it sets the kind unless Kind is given.
	Status  int    `json:"status,omitempty"`
	Kind    string `json:"kind,omitempty"`
	Message string `json:"message"`
	// RetryAfterMS is the Retry-After the "provider" sends.
	RetryAfterMS int `json:"retry_after_ms,omitempty"`
}

// ErrExhausted is wrapped by the error of a call past the last turn.
var ErrExhausted = errors.New("scripted: no turns left")

// Script is a parsed, validated script. It is immutable; each Model made
// from it plays the turns from the start.
type Script struct {
	name  string
	model string // what the script is priced as
	named string // the model the file names, "" for none
	steps []step
}

type step struct {
	resp   *llm.Response
	chunks []llm.Chunk // resp as Stream plays it, built once
	err    *llm.APIError
	delay  time.Duration
	pace   time.Duration // between streamed pieces
}

// Parse reads and validates a script. name identifies it in errors (a
// file path, say).
func Parse(name string, data []byte) (*Script, error) {
	var f File
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("scripted model %s: %w", name, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("scripted model %s: data after the script object", name)
	}
	s, err := FromFile(name, &f)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// FromFile validates f and builds a Script from it.
func FromFile(name string, f *File) (*Script, error) {
	if f.Turns == nil {
		return nil, fmt.Errorf("scripted model %s: missing \"turns\"", name)
	}
	// A script that stands for no model is priced as "scripted": an
	// offline run, which costs nothing. Its replies name no model.
	s := &Script{name: name, model: cmp.Or(f.Model, "scripted"), named: f.Model, steps: make([]step, len(f.Turns))}
	for i, t := range f.Turns {
		st, err := buildStep(i+1, t, f.Model)
		if err != nil {
			return nil, fmt.Errorf("scripted model %s: turn %d: %w", name, i+1, err)
		}
		s.steps[i] = st
	}
	return s, nil
}

func buildStep(n int, t Turn, model string) (step, error) {
	if t.DelayMS < 0 {
		return step{}, fmt.Errorf("delay_ms %d is negative", t.DelayMS)
	}
	if t.ChunkDelayMS < 0 {
		return step{}, fmt.Errorf("chunk_delay_ms %d is negative", t.ChunkDelayMS)
	}
	st := step{delay: time.Duration(t.DelayMS) * time.Millisecond, pace: time.Duration(t.ChunkDelayMS) * time.Millisecond}
	if t.Error != nil {
		if t.Content != "" || len(t.ToolCalls) > 0 || t.Usage != nil {
			return step{}, errors.New("an error turn cannot also have content, tool_calls or usage")
		}
		e, err := buildError(t.Error, model)
		if err != nil {
			return step{}, err
		}
		st.err = e
		return st, nil
	}
	if t.Content == "" && len(t.ToolCalls) == 0 {
		return step{}, errors.New("a turn needs content, tool_calls or error")
	}
	resp := &llm.Response{Content: t.Content, Model: model, FinishReason: "stop"}
	if t.Usage != nil {
		if t.Usage.PromptTokens < 0 || t.Usage.CompletionTokens < 0 {
			return step{}, errors.New("usage has negative token counts")
		}
		resp.Usage = *t.Usage
		if resp.Usage.TotalTokens == 0 {
			resp.Usage.TotalTokens = resp.Usage.PromptTokens + resp.Usage.CompletionTokens
		}
	}
	if len(t.ToolCalls) > 0 {
		resp.FinishReason = "tool_calls"
		resp.ToolCalls = make([]llm.ToolCall, len(t.ToolCalls))
		for i, c := range t.ToolCalls {
			if c.Name == "" {
				return step{}, fmt.Errorf("tool call %d has no name", i+1)
			}
			args, err := c.arguments()
			if err != nil {
				return step{}, fmt.Errorf("tool call %d (%s): arguments: %v", i+1, c.Name, err)
			}
			if len(bytes.TrimSpace(args)) == 0 {
				args = json.RawMessage("{}")
			} else if !json.Valid(args) {
				return step{}, fmt.Errorf("tool call %d (%s): arguments are not valid JSON", i+1, c.Name)
			}
			id := c.ID
			if id == "" {
				id = "call_" + strconv.Itoa(n) + "_" + strconv.Itoa(i+1)
			}
			resp.ToolCalls[i] = llm.ToolCall{ID: id, Name: c.Name, Arguments: args}
		}
	}
	st.resp, st.chunks = resp, chunksOf(resp)
	return st, nil
}

func buildError(e *Error, model string) (*llm.APIError, error) {
	if e.Message == "" {
		return nil, errors.New("error turn needs a message")
	}
	if e.RetryAfterMS < 0 {
		return nil, fmt.Errorf("retry_after_ms %d is negative", e.RetryAfterMS)
	}
	kind := llm.KindTransient
	if e.Status != 0 {
		if e.Status < 400 || e.Status > 599 {
			return nil, fmt.Errorf("error status %d is not an HTTP error status", e.Status)
		}
		kind = llm.KindForStatus(e.Status)
	}
	if e.Kind != "" {
		k, ok := llm.ParseKind(e.Kind)
		if !ok {
			return nil, fmt.Errorf("unknown error kind %q", e.Kind)
		}
		kind = k
	}
	return &llm.APIError{Kind: kind, Provider: "scripted", Model: model, Status: e.Status,
		Message: e.Message, RetryAfter: time.Duration(e.RetryAfterMS) * time.Millisecond}, nil
}

// MaxScriptBytes caps a script file: a larger one is refused before it
// is read.
const MaxScriptBytes = 64 << 20

// Load reads and parses the script file at path: a regular file of at
// most MaxScriptBytes (not a FIFO, a device or a directory, which could
// hold a reader forever).
func Load(path string) (*Script, error) {
	// Opened without blocking: opening a FIFO would wait for its writer.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("scripted model: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil, fmt.Errorf("scripted model: %w", err)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("scripted model: %s is not a regular file", path)
	case fi.Size() > MaxScriptBytes:
		return nil, fmt.Errorf("scripted model: %s is %d bytes, over the %d a script may have", path, fi.Size(), MaxScriptBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxScriptBytes+1))
	if err != nil {
		return nil, fmt.Errorf("scripted model: %w", err)
	}
	if len(data) > MaxScriptBytes {
		return nil, fmt.Errorf("scripted model: %s is over the %d bytes a script may have", path, MaxScriptBytes)
	}
	return Parse(path, data)
}

// Len returns the number of turns.
func (s *Script) Len() int { return len(s.steps) }

// Model returns a new player of the script, at its first turn.
func (s *Script) Model() *Model { return &Model{script: s} }

// Model plays a Script. It is safe for concurrent use; concurrent calls
// take successive turns.
type Model struct {
	script *Script
	mu     sync.Mutex
	next   int
}

// ModelName is the model the script's turns came from, which prices the
// replay and its cost budget; "scripted" when the file names none: an
// offline run that stands for no model costs nothing.
func (m *Model) ModelName() string { return m.script.model }

// Calls returns how many calls the model has answered so far.
func (m *Model) Calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.next
}

// From returns a model that plays the same script from its turn n
// (counting from 0), leaving m where it is: a resumed run plays on with
// it from the turn after the n its log holds, whether the script was
// loaded from a file or built in Go.
func (m *Model) From(n int) llm.Provider { return &Model{script: m.script, next: max(n, 0)} }

func (m *Model) take() (step, int, error) {
	m.mu.Lock()
	n := m.next
	m.next++
	m.mu.Unlock()
	if n >= len(m.script.steps) {
		return step{}, n + 1, &llm.APIError{Kind: llm.KindInvalidRequest, Provider: "scripted", Model: m.script.named,
			Message: fmt.Sprintf("%s: call %d but the script has only %d turns", m.script.name, n+1, len(m.script.steps)),
			Err:     ErrExhausted}
	}
	return m.script.steps[n], n + 1, nil
}

// wait sleeps d unless ctx ends first. Its callers have just checked ctx.
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Generate plays the next turn. The returned Response is shared with the
// script and must not be modified.
func (m *Model) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st, _, err := m.take()
	if err != nil {
		return nil, err
	}
	if err := wait(ctx, st.delay); err != nil {
		return nil, err
	}
	if st.err != nil {
		e := *st.err
		return nil, &e
	}
	return st.resp, nil
}

// Stream plays the next turn as a stream: the content in small pieces (a
// word at a time), then each tool call in two pieces, then the usage. The
// chunks are shared with the script and must not be modified.
func (m *Model) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(llm.Chunk{}, err)
			return
		}
		st, _, err := m.take()
		if err == nil {
			err = wait(ctx, st.delay)
		}
		if err == nil && st.err != nil {
			e := *st.err
			err = &e
		}
		if err != nil {
			yield(llm.Chunk{}, err)
			return
		}
		for i, c := range st.chunks {
			if i > 0 && st.pace > 0 {
				if err := wait(ctx, st.pace); err != nil {
					yield(llm.Chunk{}, err)
					return
				}
			}
			if !yield(c, nil) {
				return
			}
		}
	}
}

// chunksOf cuts r the way Stream plays it.
func chunksOf(r *llm.Response) []llm.Chunk {
	var chunks []llm.Chunk
	for text := r.Content; len(text) > 0; {
		n := pieceLen(text)
		chunks = append(chunks, llm.Chunk{Text: text[:n]})
		text = text[n:]
	}
	for i, c := range r.ToolCalls {
		args := string(c.Arguments)
		half := len(args) / 2
		for half > 0 && !utf8.RuneStart(args[half]) {
			half--
		}
		chunks = append(chunks,
			llm.Chunk{ToolCall: &llm.ToolCallDelta{Index: i, ID: c.ID, Name: c.Name, Arguments: args[:half]}},
			llm.Chunk{ToolCall: &llm.ToolCallDelta{Index: i, Arguments: args[half:]}})
	}
	u := r.Usage
	return append(chunks, llm.Chunk{Usage: &u, Model: r.Model, FinishReason: r.FinishReason})
}

// pieceLen returns the length of the first word of s with the spaces after it.
func pieceLen(s string) int {
	i := 0
	for i < len(s) && s[i] != ' ' && s[i] != '\n' {
		i++
	}
	for i < len(s) && (s[i] == ' ' || s[i] == '\n') {
		i++
	}
	return max(i, 1)
}

// Func is a model written as a Go function, for tests that need to see
// what the model was sent or to answer from it.
type Func func(ctx context.Context, req *llm.Request) (*llm.Response, error)

// Generate calls f.
func (f Func) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	return f(ctx, req)
}

func init() {
	llm.Register("scripted", llm.Driver{Open: func(model string, cfg llm.Config) (llm.Provider, error) {
		if model == "" {
			return nil, errors.New("scripted model: the model name must be scripted:PATH")
		}
		s, err := Load(scriptPath(model, cfg))
		if err != nil {
			return nil, err
		}
		return s.Model(), nil
	}, Resolve: func(model string, cfg llm.Config) string {
		if abs, err := filepath.Abs(scriptPath(model, cfg)); err == nil {
			return abs
		}
		return model
	}})
}

// scriptPath is the script file a model id names: relative to cfg.Dir.
func scriptPath(model string, cfg llm.Config) string {
	if !filepath.IsAbs(model) && cfg.Dir != "" {
		return filepath.Join(cfg.Dir, model)
	}
	return model
}
