package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"os"
	"sync"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/policy"
)

// Recorder is middleware that writes down every model call it passes on,
// as the turns of a script: a real run recorded this way replays offline
// with the scripted provider. Each attempt is one turn, failed ones as
// error turns, so a replay retries exactly where the original did.
// Secrets are stripped from what it records.
type Recorder struct {
	mu      sync.Mutex
	model   string
	turns   []Turn
	secrets *policy.Redactor
}

// NewRecorder returns an empty recorder. Secrets are stripped from what
// it records (policy.Secrets: key and token shapes, private keys, JWTs,
// and the values of the environment's *_KEY, *_TOKEN, *_SECRET and
// *_PASSWORD variables).
func NewRecorder() *Recorder {
	return &Recorder{secrets: policy.Secrets()}
}

// Wrap returns p with its calls recorded.
func (r *Recorder) Wrap(p llm.Provider) llm.Provider {
	w := &recording{r: r, next: p}
	if s, ok := p.(llm.Streamer); ok {
		return &recordingStream{recording: w, stream: s}
	}
	return w
}

// File returns the recording so far.
func (r *Recorder) File() *File {
	r.mu.Lock()
	defer r.mu.Unlock()
	return &File{Format: FormatVersion, Model: r.model, Turns: append([]Turn(nil), r.turns...)}
}

// WriteFile writes the recording to path as a script file.
func (r *Recorder) WriteFile(path string) error {
	data, err := json.MarshalIndent(r.File(), "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o600); err != nil {
		return err
	}
	return os.Chmod(path, 0o600) // a file that was there keeps its mode otherwise

}

// strip removes secrets from s.
func (r *Recorder) strip(s string) string { return r.secrets.String(s) }

func (r *Recorder) add(resp *llm.Response, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var t Turn
	if err != nil {
		var ae *llm.APIError
		if !errors.As(err, &ae) {
			return // a cancelled call has nothing to replay
		}
		t.Error = &Error{Status: ae.Status, Kind: ae.Kind.String(), Message: r.strip(ae.Message), RetryAfterMS: int(ae.RetryAfter.Milliseconds())}
		if t.Error.Message == "" {
			t.Error.Message = ae.Kind.String()
		}
		r.turns = append(r.turns, t)
		return
	}
	if resp.Model != "" && r.model == "" {
		r.model = resp.Model
	}
	t.Content = r.strip(resp.Content)
	for _, c := range resp.ToolCalls {
		args := json.RawMessage(r.strip(string(c.Arguments)))
		if !json.Valid(args) {
			args = c.Arguments
		}
		t.ToolCalls = append(t.ToolCalls, ToolCall{ID: c.ID, Name: c.Name, Arguments: args})
	}
	u := resp.Usage
	t.Usage = &u
	if t.Content == "" && len(t.ToolCalls) == 0 {
		t.Content = " " // a turn needs something; an empty reply replays as a blank one
	}
	r.turns = append(r.turns, t)
}

type recording struct {
	r    *Recorder
	next llm.Provider
}

func (w *recording) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	resp, err := w.next.Generate(ctx, req)
	w.r.add(resp, err)
	return resp, err
}

type recordingStream struct {
	*recording
	stream llm.Streamer
}

// Stream passes chunks on as they come and records the assembled reply.
func (w *recordingStream) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		stopped := false
		resp, err := llm.Collect(func(inner func(llm.Chunk, error) bool) {
			for c, err := range w.stream.Stream(ctx, req) {
				if !inner(c, err) {
					return
				}
			}
		}, func(c llm.Chunk) {
			if !stopped && !yield(c, nil) {
				stopped = true
			}
		})
		w.r.add(resp, err)
		if err != nil && !stopped {
			yield(llm.Chunk{}, err)
		}
	}
}
