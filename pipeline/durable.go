package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/store"
)

// WithStore stores the run in st: the pipeline's own run (its definition,
// input, stage events and Result, whose envelope a paused pipeline
// resumes from) and each stage agent's run, as a run of its own whose
// parent is the pipeline's.
func WithStore(st store.Store) RunOption { return func(c *runConfig) { c.store = st } }

// WithRunID gives the run this id instead of a new one. With WithStore,
// a stored pipeline paused for the user (awaiting_approval) goes on as
// the same run (see Stored).
func WithRunID(id string) RunOption { return func(c *runConfig) { c.runID = id } }

// Decision answers a stage paused with the outcome confirm: approved or
// not, and why. Given to Resume as the answer, it reaches the stage's
// agent as user_response ({"approved": ..., "reason": ...}) and, in a
// stored run, the audit log.
type Decision struct {
	Approved bool   `json:"approved"`
	Reason   string `json:"reason,omitempty"`
}

// pipelineLeaseTTL is how long a pipeline run's lease lasts unless
// renewed; it is renewed every third of it.
const pipelineLeaseTTL = 30 * time.Second

// durable writes a pipeline run to its store.
type durable struct {
	st      store.Store
	holder  string
	mu      sync.Mutex
	queued  []store.Record
	failed  error
	release func() // stops renewing the lease
}

// start is the first record of a pipeline run: enough to build the
// pipeline again.
type start struct {
	Kind       string          `json:"kind"`
	RunID      string          `json:"run_id"`
	Definition json.RawMessage `json:"definition"`
	BaseDir    string          `json:"base_dir"`
	AgentsDir  string          `json:"agents_dir"`
	Input      map[string]any  `json:"input"`
	StartedAt  agent.Timestamp `json:"started_at"`
}

func (r *runState) openStore(ctx context.Context, c *runConfig) error {
	if c.store == nil {
		return nil
	}
	d := &durable{st: c.store, holder: store.NewHolder()}
	def := r.p.def
	if c.runID == "" {
		err := d.st.Create(ctx, store.Run{ID: r.runID, Kind: "pipeline", Name: def.PipelineName, Version: def.Version,
			SessionID: r.env.ID, Status: store.Running, Holder: d.holder, LeaseUntil: time.Now().Add(pipelineLeaseTTL), CreatedAt: r.start})
		if err != nil {
			return err
		}
		data, _ := json.Marshal(start{Kind: "pipeline", RunID: r.runID, Definition: mustJSON(def), BaseDir: abs(r.p.baseDir),
			AgentsDir: abs(r.p.agentsDir), Input: r.env.RawInput, StartedAt: agent.Timestamp{Time: r.start}})
		d.queued = append(d.queued, store.Record{Kind: store.KindStart, Data: data})
	} else {
		if err := d.st.Acquire(ctx, r.runID, d.holder, pipelineLeaseTTL); err != nil {
			return err
		}
		data, _ := json.Marshal(map[string]any{"turn": r.env.HopCount, "holder": d.holder})
		d.queued = append(d.queued, store.Record{Kind: store.KindResume, Turn: r.env.HopCount + 1, Data: data})
		if dec, ok := r.env.Metadata["user_response"].(Decision); ok {
			decision := map[bool]string{true: "approve", false: "deny"}[dec.Approved]
			if _, err := d.st.AppendAudit(ctx, store.AuditRecord{RunID: r.runID, Agent: def.PipelineName, Rule: "pipeline.confirm",
				Decision: decision, Target: "stage:" + r.env.Current, Reason: dec.Reason}); err != nil {
				return err
			}
		}
	}
	if err := d.st.Append(ctx, store.Write{RunID: r.runID, Holder: d.holder, Records: d.queued, Status: store.Running}); err != nil {
		return err
	}
	d.queued = nil
	r.store = d
	r.sessionOpts = append(r.sessionOpts, agent.WithStore(c.store))
	// The pipeline's own events; each stage's are in its own run.
	r.unsub = r.bus.Subscribe(func(e event.Event) {
		if e.RunID == r.runID {
			d.mu.Lock()
			d.queued = append(d.queued, store.Record{Kind: store.KindEvent, Turn: e.Turn, Time: e.Time, Data: mustJSON(e)})
			d.mu.Unlock()
		}
	}, event.Inline(), event.Except(event.ContentChunk))
	d.release = store.KeepLease(d.st, r.runID, d.holder, pipelineLeaseTTL, nil)
	return nil
}

// commit writes the events queued since the last stage.
func (r *runState) commit() {
	d := r.store
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failed != nil || len(d.queued) == 0 {
		return
	}
	if err := d.st.Append(context.Background(), store.Write{RunID: r.runID, Holder: d.holder, Records: d.queued}); err != nil {
		d.failed = err
		return
	}
	d.queued = nil
}

// closeStore writes the Result and the run's status, and gives up the
// lease.
func (r *runState) closeStore() error {
	d := r.store
	if d == nil {
		return nil
	}
	r.bus.Flush()
	r.unsub()
	d.release()
	t := &r.res.Result
	status, sum := t.StoreStatus()
	d.mu.Lock()
	defer d.mu.Unlock()
	recs := append(d.queued, store.Record{Kind: store.KindResult, Turn: t.Iterations, Data: mustJSON(r.res)})
	err := d.st.Append(context.Background(), store.Write{RunID: r.runID, Holder: d.holder, Records: recs, Status: status,
		Summary: &sum, Release: true})
	if err != nil {
		return fmt.Errorf("%w: %w", agent.ErrStore, err)
	}
	return nil
}

// Stored builds the pipeline a stored run ran (its definition as it ran,
// its directories) and returns it with the envelope the run ended with:
// a paused run's goes on with Resume, WithStore and WithRunID.
func Stored(ctx context.Context, st store.Store, runID string, opts ...Option) (*Pipeline, *Envelope, error) {
	recs, err := st.Records(ctx, runID, 0)
	if err != nil {
		return nil, nil, err
	}
	var s start
	var res *Result
	for i := range recs {
		rec := &recs[i]
		if err := store.CheckFormat(rec); err != nil {
			return nil, nil, err
		}
		switch rec.Kind {
		case store.KindStart:
			err = json.Unmarshal(rec.Data, &s)
		case store.KindResult:
			res = &Result{}
			err = json.Unmarshal(rec.Data, res)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("run %s: record %d (%s): %w", runID, rec.Seq, rec.Kind, err)
		}
	}
	if s.Kind != "pipeline" {
		return nil, nil, fmt.Errorf("run %s is not a pipeline's", runID)
	}
	var def Definition
	if err := json.Unmarshal(s.Definition, &def); err != nil {
		return nil, nil, fmt.Errorf("run %s: its definition: %w", runID, err)
	}
	p, err := New(&def, s.BaseDir, append([]Option{WithAgentsDir(s.AgentsDir)}, opts...)...)
	if err != nil {
		return nil, nil, err
	}
	if res == nil || res.Envelope == nil {
		return p, nil, nil
	}
	return p, res.Envelope, nil
}

// abs makes a recorded directory absolute, so that a resume from
// elsewhere finds it.
func abs(dir string) string {
	if a, err := filepath.Abs(dir); err == nil {
		return a
	}
	return dir
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"unencodable": err.Error()})
	}
	return b
}
