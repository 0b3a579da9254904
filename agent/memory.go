package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "github.com/agentry/agentry/memory/inmem" // a spec's "mem:" always opens

	"github.com/agentry/agentry/internal/journal"
	"github.com/agentry/agentry/internal/memseal"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/memory"
	"github.com/agentry/agentry/memory/memtool"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/prompt"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/tool"
)

// WithMemory gives the agent the backend its spec's memory uses when the
// spec names none (the binary gives its run store's database). The agent
// does not close it.
func WithMemory(b memory.Backend) Option { return func(o *options) { o.memory = b } }

// WithEncryptionKey seals the agent's memory and the logs of its stored
// runs with key (32 bytes, AES-256-GCM; see runlog.Sealer and
// memory.ParseKey): what they write is encrypted and authenticated,
// only sealed values and records are read back, and reading a sealed log
// (Stored, Resume, Replay) needs the key. The binary gives the key
// AGENTRY_ENCRYPTION_KEY holds.
func WithEncryptionKey(key []byte) Option { return func(o *options) { o.memoryKey = key } }

// MemoryDelta is something a run wrote to memory (Stream and ID) or to a
// collection (Collection and Key): the Result's memory_deltas.
type MemoryDelta struct {
	Stream     string `json:"stream,omitempty"`
	ID         int64  `json:"id,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Text       string `json:"text,omitempty"`
	Collection string `json:"collection,omitempty"`
	Key        string `json:"key,omitempty"`
}

// agentMemory is an agent's memory: its backend (sealed when
// AGENTRY_ENCRYPTION_KEY is set), the spec's field and the policy's
// filters on writes.
type agentMemory struct {
	b       *memseal.Backend
	spec    *spec.Memory
	keep    memory.Retention
	filters *policy.Filters
}

// openMemory opens the backend of the spec's memory field.
func (a *Agent) openMemory(o options) []string {
	m := a.spec.Memory
	if m == nil {
		return nil
	}
	ttl, _ := spec.ParseTTL(m.TTL) // checked with the spec
	am := &agentMemory{spec: m, keep: memory.Retention{MaxEntries: m.MaxEntries, TTL: ttl}, filters: a.spec.Policy.Filters(policy.MemoryWrite)}
	var b memory.Backend
	switch {
	case m.Backend != "":
		dsn := m.Backend
		if !strings.Contains(dsn, ":") && !filepath.IsAbs(dsn) {
			dsn = filepath.Join(o.baseDir, dsn)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		opened, err := memory.Open(ctx, dsn)
		if err != nil {
			return []string{fmt.Sprintf("memory.backend: %v", err)}
		}
		a.closers = append(a.closers, opened.Close)
		b = opened
	case o.memory != nil:
		b = o.memory
	default:
		return []string{"memory.backend: none given, and the host gives none (agent.WithMemory)"}
	}
	sealed, err := memseal.New(b, o.memoryKey)
	if err != nil {
		return []string{fmt.Sprintf("WithEncryptionKey: %v", err)}
	}
	am.b = sealed
	a.mem = am
	return nil
}

// runMemory is a run's view of its agent's memory: the scope of its
// memory tools (the stream and collections its input names), and what
// it wrote.
type runMemory struct {
	am     *agentMemory
	scope  memtool.Scope
	stream string
	block  string // what recall put into the prompt

	mu      sync.Mutex
	deltas  []MemoryDelta
	claimed map[int64]bool // entries a resume found written before its crash
}

// recall opens the run's memory and, at kickoff, puts the stream's last
// entries into the system prompt. A resumed run takes what the first
// process loaded from its log, so its prompt is the one it had.
func (r *run) recall(ctx context.Context) error {
	am := r.a.mem
	if am == nil {
		return nil
	}
	rm := &runMemory{am: am}
	vars, err := memoryVars(r.st.Input, r.info.UserID)
	if err != nil {
		return err
	}
	if r.info.UserID == "" {
		for _, t := range append([]string{am.spec.Stream}, am.spec.Collections...) {
			if slices.Contains(prompt.Vars(t), "user_id") {
				return fmt.Errorf("%w: the memory is named by ${user_id}, the run's user, and the run has none (WithUser)", ErrInvalidInput)
			}
		}
	}
	if rm.stream, err = prompt.Render("memory.stream", am.spec.Stream, vars); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidInput, err)
	}
	for i, c := range am.spec.Collections {
		name, err := prompt.Render(fmt.Sprintf("memory.collections[%d]", i), c, vars)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidInput, err)
		}
		rm.scope.Collections = append(rm.scope.Collections, name)
	}
	if !r.mayRead(ctx, rm.stream, true) {
		return nil // refused once the run's log is open: nothing is loaded
	}
	kept := rm.scope.Collections[:0]
	for _, c := range rm.scope.Collections {
		if r.mayRead(ctx, c, false) { // a collection the caller may not read is out of the tools' reach
			kept = append(kept, c)
		}
	}
	rm.scope.Collections = kept
	rm.scope.Backend, rm.scope.Stream, rm.scope.Keep = am.b, rm.stream, am.keep
	rm.scope.RunID, rm.scope.Agent, rm.scope.UserID = r.st.RunID, r.a.spec.AgentName, r.info.UserID
	rm.scope.Filter = r.filterWrite
	rm.scope.Appended = func(e memory.Entry) {
		rm.note(MemoryDelta{Stream: e.Stream, ID: e.ID, Kind: e.Kind, Text: e.Text})
	}
	rm.scope.Wrote = func(d memory.Doc) { rm.note(MemoryDelta{Collection: d.Collection, Key: d.Key}) }
	r.ctx = memtool.WithScope(r.ctx, &rm.scope) // the memory tools read it
	r.mem = rm
	if rc := r.s.cfg.resume; rc != nil {
		// What recall loaded, as the first process kept it (sealed when
		// the memory is).
		start := &rc.log.Start
		if rm.block, err = am.b.OpenText(start.Memory, startBind(start.RunID), "the recalled memory of run "+start.RunID); err != nil {
			return fmt.Errorf("%w: %w", ErrMemory, err)
		}
	} else if n := am.spec.LoadLast; n > 0 {
		entries, err := am.b.Memory().Read(ctx, rm.stream, memory.ReadOptions{Limit: n, Order: memory.Newest})
		if err != nil {
			return fmt.Errorf("%w: loading %s: %w", ErrMemory, rm.stream, err)
		}
		slices.Reverse(entries)
		rm.block = memoryBlock(rm.stream, entries)
	}
	if rm.block != "" {
		r.addToSystem(rm.block)
	}
	return nil
}

// startBind is what the recalled memory in a run's start record is
// sealed to: that run alone.
func startBind(runID string) string { return "start\x00" + runID }

// startRecord is the recalled memory as a run's start record keeps it:
// sealed when the memory is.
func (rm *runMemory) startRecord(runID string) string {
	return rm.am.b.SealText(rm.block, startBind(runID))
}

// memoryVars are what the memory's stream and collections are named
// from: the input, with user_id the run's user (WithUser, --user). A
// user's memory is named by who the run acts for, never by what the
// caller wrote in the input: an input whose user_id names someone else
// is refused, and a run without a user has no ${user_id}.
func memoryVars(input map[string]any, user string) (map[string]any, error) {
	given, inInput := input["user_id"]
	switch {
	case inInput && user != "" && fmt.Sprint(given) != user:
		return nil, fmt.Errorf("%w: the input's user_id %q is not the run's user %q; memory is named by the run's user",
			ErrInvalidInput, fmt.Sprint(given), user)
	case user == "" && inInput:
		return nil, fmt.Errorf("%w: the input names user_id %q but the run has no user (WithUser); memory is named by the run's user",
			ErrInvalidInput, fmt.Sprint(given))
	case user == "":
		return input, nil
	}
	vars := make(map[string]any, len(input)+1)
	for k, v := range input {
		vars[k] = v
	}
	vars["user_id"] = user
	return vars, nil
}

// memoryBlock is how remembered entries read in the system prompt.
func memoryBlock(stream string, entries []memory.Entry) string {
	if len(entries) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "What you remember (%s, oldest first):", stream)
	for _, e := range entries {
		fmt.Fprintf(&b, "\n- %s", e.Time.Format("2006-01-02 15:04"))
		if e.Kind != "" {
			fmt.Fprintf(&b, " [%s]", e.Kind)
		}
		b.WriteString(" " + truncate(e.Text, 2<<10)) // one line each, a long one cut
	}
	return b.String()
}

// addToSystem appends text to the system prompt (a system message first
// when there is none).
func (r *run) addToSystem(text string) {
	msgs := r.st.Messages
	if len(msgs) > 0 && msgs[0].Role == llm.RoleSystem {
		msgs[0].Content += "\n\n" + text
		return
	}
	r.st.Messages = append([]llm.Message{{Role: llm.RoleSystem, Content: text}}, msgs...)
}

// filterWrite passes text bound for memory (target names it) through the
// policy's memory_write filters and the default redaction. A JSON text
// (a document's value) stays valid JSON.
func (r *run) filterWrite(ctx context.Context, target, text string, isJSON bool) (string, error) {
	text, applied := r.mem.am.filters.Apply(text, isJSON)
	for _, f := range applied {
		rule := "content_filters." + f.Filter
		if f.Action == policy.Block {
			reason := fmt.Sprintf("the content filter %s found what it blocks in a write to %s", f.Filter, target)
			if err := r.report(ctx, target, "", rule, "block", reason); err != nil {
				return "", err
			}
			return "", &tool.ErrorDetails{Type: CodePolicyViolation, Message: reason, Recoverable: true, Details: map[string]any{"rule": rule}}
		}
		if err := r.report(ctx, target, "", rule, "redact", "redacted in a write to "+target); err != nil {
			return "", err
		}
	}
	if isJSON {
		return string(r.a.redact.Bytes([]byte(text))), nil
	}
	return r.a.redact.String(text), nil
}

// rememberOnce is remember as a step of the run log under key: done
// once, whatever crashes and resumes. A resumed run that finds the step
// on record, or finds the entry in the stream (written by this run
// before a crash cut the record), does not write it again.
func (r *run) rememberOnce(ctx context.Context, key, kind, text string) error {
	j := r.link.journal
	rm := r.mem
	if j == nil {
		_, err := rm.scope.Append(ctx, kind, text)
		return err
	}
	if j.log != nil {
		if rec, ok := j.log.Results[key]; ok && rec.Output != nil {
			var d MemoryDelta
			if json.Unmarshal([]byte(*rec.Output), &d) == nil {
				rm.note(d)
			}
			return nil
		}
	}
	text, err := r.filterWrite(ctx, "memory:"+rm.stream, text, false)
	if err != nil {
		return err
	}
	if j.log != nil {
		d, found, err := r.writtenBefore(ctx, kind, text)
		if err != nil {
			return err
		}
		if found {
			rm.note(d)
			return j.commit(ctx, journal.Record(store.KindToolResult, r.st.Turn, key, memoryStep(key, d)))
		}
	}
	e, err := rm.scope.AppendFiltered(ctx, kind, text)
	if err != nil {
		return err
	}
	d := MemoryDelta{Stream: e.Stream, ID: e.ID, Kind: kind, Text: text}
	return j.commit(ctx, journal.Record(store.KindToolResult, r.st.Turn, key, memoryStep(key, d)))
}

// memoryStep is the run log's record of an end-of-run memory write.
func memoryStep(key string, d MemoryDelta) runlog.ToolResult {
	out := string(journal.JSON(d))
	return runlog.ToolResult{CallID: key, Tool: "memory.write", Arguments: "{}", Output: &out, StartedAt: time.Now()}
}

// writtenBefore finds the entry this
// run wrote of kind with text (filtered as it was written).
//
// Only entries appended since the run began are looked at, oldest first,
// and each is claimed once: two writes of the same text are two entries.
func (r *run) writtenBefore(ctx context.Context, kind, text string) (MemoryDelta, bool, error) {
	rm := r.mem
	entries, err := rm.am.b.Memory().Read(ctx, rm.stream, memory.ReadOptions{Order: memory.Oldest, Since: r.st.StartedAt.Time})
	if err != nil {
		return MemoryDelta{}, false, err
	}
	for _, e := range entries {
		if e.RunID == r.st.RunID && e.Kind == kind && e.Text == text && !rm.claimed[e.ID] {
			if rm.claimed == nil {
				rm.claimed = map[int64]bool{}
			}
			rm.claimed[e.ID] = true
			return MemoryDelta{Stream: e.Stream, ID: e.ID, Kind: kind, Text: e.Text}, true, nil
		}
	}
	return MemoryDelta{}, false, nil
}

func (rm *runMemory) note(d MemoryDelta) {
	rm.mu.Lock()
	rm.deltas = append(rm.deltas, d)
	rm.mu.Unlock()
}

// memorize writes at the end of a run what the spec's memory.write
// names. A replay writes nothing.
func (r *run) memorize(final *Final) error {
	rm := r.mem
	if rm == nil || len(rm.am.spec.Write) == 0 {
		return nil
	}
	if j := r.link.journal; j != nil && j.w == nil {
		return nil
	}
	ctx := context.WithoutCancel(r.ctx)
	n := 0 // the writes so far: each is a step of the run log, RUN:memory:N
	for _, w := range rm.am.spec.Write {
		var texts []string
		switch w {
		case "input":
			texts = append(texts, string(journal.JSON(r.st.Input)))
		case "final_answer":
			text := final.Text
			if final.Output != nil {
				text = string(journal.JSON(final.Output))
			}
			texts = append(texts, text)
		case "tool_results":
			for i := range r.trace.steps {
				if s := &r.trace.steps[i]; s.call != nil && (s.more == nil || s.more.err == "") {
					// Redacted before it is cut: a secret cut in two would not be seen.
					texts = append(texts, s.call.Name+": "+truncate(r.a.redact.String(s.obs), 4<<10))
				}
			}
		}
		for _, text := range texts {
			if text == "" {
				continue
			}
			n++
			if err := r.rememberOnce(ctx, r.st.RunID+":memory:"+strconv.Itoa(n), w, text); err != nil {
				var d *tool.ErrorDetails
				if errors.As(err, &d) && d.Type == CodePolicyViolation {
					continue // blocked: audited, not written, not a failure of the run
				}
				return fmt.Errorf("%w: writing %s to %s: %w", ErrMemory, w, rm.stream, err)
			}
		}
	}
	return nil
}

// result returns what the run wrote, for the Result.
func (rm *runMemory) result() []MemoryDelta {
	if rm == nil {
		return nil
	}
	rm.mu.Lock()
	defer rm.mu.Unlock()
	return slices.Clone(rm.deltas)
}
