// Package storetest is the conformance suite of run stores: every backend
// runs it against a real database, so that what one backend guarantees,
// all do.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentry/agentry/store"
)

// Run runs the suite. open returns a new, empty store for one test; the
// suite closes it.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"CreateAndGet", testCreateAndGet},
		{"CreateRefuses", testCreateRefuses},
		{"List", testList},
		{"AppendAndRead", testAppendAndRead},
		{"AppendLargeBatch", testAppendLargeBatch},
		{"AppendFenced", testAppendFenced},
		{"AppendStatusAndSummary", testAppendStatusAndSummary},
		{"Leases", testLeases},
		{"ExpiredLeaseIsInterrupted", testExpiredLease},
		{"DeadHolderIsInterrupted", testDeadHolder},
		{"Break", testBreak},
		{"ConcurrentAcquire", testConcurrentAcquire},
		{"ConcurrentAppends", testConcurrentAppends},
		{"Prune", testPrune},
		{"KeepLease", testKeepLease},
		{"Audit", testAudit},
		{"ConcurrentAudit", testConcurrentAudit},
		{"AuditTampered", testAuditTampered},
		{"VerifyWhileAppending", testVerifyWhileAppending},
		{"Pins", testPins},
		{"CreateWithRecords", testCreateWithRecords},
		{"Blobs", testBlobs},
		{"Conversations", testConversations},
		{"ConversationRace", testConversationRace},
		{"ConversationList", testConversationList},
		{"ConversationFork", testConversationFork},
		{"ConversationDelete", testConversationDelete},
		{"ConversationOrder", testConversationOrder},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.fn(t, s)
		})
	}
}

const ttl = time.Minute

func newRun(id string) store.Run {
	return store.Run{ID: id, Kind: "agent", Name: "adder", Version: "1.0.0", SessionID: "ses_" + id,
		Status: store.Running, Holder: "h1", LeaseUntil: time.Now().Add(ttl)}
}

func mustCreate(t *testing.T, s store.Store, r store.Run) {
	t.Helper()
	if err := s.Create(context.Background(), r); err != nil {
		t.Fatalf("Create(%s): %v", r.ID, err)
	}
}

func testCreateAndGet(t *testing.T, s store.Store) {
	ctx := context.Background()
	r := newRun("run_a")
	r.ParentID, r.User = "run_p", "ada"
	mustCreate(t, s, r)
	got, err := s.Get(ctx, "run_a")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != r.ID || got.Kind != "agent" || got.Name != "adder" || got.Version != "1.0.0" || got.ParentID != "run_p" || got.User != "ada" ||
		got.SessionID != "ses_run_a" || got.Status != store.Running || got.Holder != "h1" {
		t.Errorf("Get = %+v, want the run created", got)
	}
	if d := got.LeaseUntil.Sub(r.LeaseUntil); d < -time.Millisecond || d > time.Millisecond {
		t.Errorf("LeaseUntil = %v, want %v", got.LeaseUntil, r.LeaseUntil)
	}
	if got.CreatedAt.IsZero() || time.Since(got.CreatedAt) > time.Minute {
		t.Errorf("CreatedAt = %v, want about now", got.CreatedAt)
	}
	if got.CostUSD != nil {
		t.Errorf("CostUSD = %v, want nil before a summary", *got.CostUSD)
	}
	if _, err := s.Get(ctx, "run_missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get(missing) = %v, want ErrNotFound", err)
	}
}

func testCreateRefuses(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreate(t, s, newRun("run_a"))
	for _, tc := range []struct {
		name string
		run  store.Run
		want error
	}{
		{"duplicate id", newRun("run_a"), store.ErrExists},
		{"no id", store.Run{Kind: "agent", Status: store.Running}, nil},
		{"bad status", store.Run{ID: "run_b", Kind: "agent", Status: "sleeping"}, nil},
		{"interrupted", store.Run{ID: "run_c", Kind: "agent", Status: store.Interrupted}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Create(ctx, tc.run)
			if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("Create = %v, want an error (%v)", err, tc.want)
			}
		})
	}
}

func testList(t *testing.T, s store.Store) {
	ctx := context.Background()
	base := time.Now().Add(-time.Hour)
	for i, name := range []string{"adder", "adder", "writer", "adder"} {
		r := newRun("run_" + strconv.Itoa(i))
		r.Name, r.CreatedAt = name, base.Add(time.Duration(i)*time.Minute)
		if i == 3 {
			r.ParentID = "run_0"
		}
		if i == 1 {
			r.Kind = "eval"
		}
		if i%2 == 0 {
			r.User = "ada"
		}
		mustCreate(t, s, r)
	}
	if err := s.Append(ctx, store.Write{RunID: "run_1", Holder: "h1", Status: store.Completed, Release: true}); err != nil {
		t.Fatal(err)
	}
	ids := func(rs []store.Run) string {
		out := ""
		for _, r := range rs {
			out += r.ID + " "
		}
		return out
	}
	for _, tc := range []struct {
		name string
		f    store.Filter
		want string
	}{
		{"all newest first", store.Filter{}, "run_3 run_2 run_1 run_0 "},
		{"by name", store.Filter{Name: "writer"}, "run_2 "},
		{"by status", store.Filter{Status: store.Completed}, "run_1 "},
		{"running", store.Filter{Status: store.Running}, "run_3 run_2 run_0 "},
		{"by parent", store.Filter{ParentID: "run_0"}, "run_3 "},
		{"limit", store.Filter{Limit: 2}, "run_3 run_2 "},
		{"the page after a cursor", store.Filter{Cursor: "run_2", Limit: 2}, "run_1 run_0 "},
		{"the last page", store.Filter{Cursor: "run_0"}, ""},
		{"since", store.Filter{Since: base.Add(time.Minute)}, "run_3 run_2 run_1 "},
		{"until", store.Filter{Until: base.Add(2 * time.Minute)}, "run_1 run_0 "},
		{"since, until and a cursor", store.Filter{Since: base, Until: base.Add(3 * time.Minute), Cursor: "run_2"}, "run_1 run_0 "},
		{"none", store.Filter{Name: "nobody"}, ""},
		{"by kind", store.Filter{Kind: "eval"}, "run_1 "},
		{"but a kind", store.Filter{NotKind: "eval"}, "run_3 run_2 run_0 "},
		{"but a kind, after a cursor", store.Filter{NotKind: "eval", Cursor: "run_2"}, "run_0 "},
		{"by user", store.Filter{User: "ada"}, "run_2 run_0 "},
		{"by user and name", store.Filter{User: "ada", Name: "adder"}, "run_0 "},
		{"another user's none", store.Filter{User: "bob"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := s.List(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(rs); got != tc.want {
				t.Errorf("List(%+v) = %q, want %q", tc.f, got, tc.want)
			}
		})
	}
	if _, err := s.List(ctx, store.Filter{Status: "sleeping"}); err == nil {
		t.Error("List with an unknown status: no error")
	}
}

func rec(kind store.Kind, turn int, data string) store.Record {
	return store.Record{Kind: kind, Turn: turn, Data: json.RawMessage(data)}
}

func testAppendAndRead(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreate(t, s, newRun("run_a"))
	mustCreate(t, s, newRun("run_b"))
	at := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	// Key order and spacing must survive: a stored Result is printed back
	// byte for byte.
	first := []store.Record{
		rec(store.KindStart, 0, `{"z": 1, "a": [1, 2]}`),
		{Kind: store.KindToolIntent, Turn: 2, Key: "run_a:2:0", Time: at, Data: json.RawMessage(`{"name":"pay"}`)},
	}
	if err := s.Append(ctx, store.Write{RunID: "run_a", Holder: "h1", Records: first}); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, store.Write{RunID: "run_b", Holder: "h1", Records: []store.Record{rec(store.KindEvent, 1, `{}`)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, store.Write{RunID: "run_a", Holder: "h1", Records: []store.Record{rec(store.KindResult, 3, `"done"`)}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Records(ctx, "run_a", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("Records = %d records, want 3", len(got))
	}
	wantData := []string{`{"z": 1, "a": [1, 2]}`, `{"name":"pay"}`, `"done"`}
	for i, r := range got {
		if string(r.Data) != wantData[i] {
			t.Errorf("record %d: Data = %s, want %s", i, r.Data, wantData[i])
		}
		if r.Format != store.Format {
			t.Errorf("record %d: Format = %q, want %q", i, r.Format, store.Format)
		}
		if err := store.CheckFormat(&r); err != nil {
			t.Errorf("record %d: %v", i, err)
		}
		if i > 0 && r.Seq <= got[i-1].Seq {
			t.Errorf("record %d: Seq %d after %d", i, r.Seq, got[i-1].Seq)
		}
	}
	if got[1].Kind != store.KindToolIntent || got[1].Turn != 2 || got[1].Key != "run_a:2:0" || !got[1].Time.Equal(at) {
		t.Errorf("record 1 = %+v, want the intent as written", got[1])
	}
	if got[0].Time.IsZero() {
		t.Error("record 0: no time filled in")
	}
	after, err := s.Records(ctx, "run_a", got[1].Seq)
	if err != nil || len(after) != 1 || after[0].Kind != store.KindResult {
		t.Errorf("Records after %d = %v, %v; want the result only", got[1].Seq, after, err)
	}
	if _, err := s.Records(ctx, "run_missing", 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Records(missing) = %v, want ErrNotFound", err)
	}
	if kr, ok := s.(store.KindReader); ok {
		some, err := kr.RecordsOf(ctx, "run_a", store.KindResult, store.KindStart)
		if err != nil || len(some) != 2 || some[0].Kind != store.KindStart || string(some[1].Data) != `"done"` || some[0].Seq != got[0].Seq {
			t.Errorf("RecordsOf(start, result) = %+v, %v; want the two, in order", some, err)
		}
		if none, err := kr.RecordsOf(ctx, "run_b", store.KindResult); err != nil || len(none) != 0 {
			t.Errorf("RecordsOf a kind the run has none of = %v, %v", none, err)
		}
		if _, err := kr.RecordsOf(ctx, "run_missing", store.KindStart); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("RecordsOf(missing) = %v, want ErrNotFound", err)
		}
	}
	if err := s.Append(ctx, store.Write{RunID: "run_missing", Holder: "h1"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Append(missing) = %v, want ErrNotFound", err)
	}
	if err := s.Append(ctx, store.Write{RunID: "run_a", Holder: "h1", Records: []store.Record{{Data: json.RawMessage(`1`)}}}); err == nil {
		t.Error("Append of a record without a kind: no error")
	}
	bad := store.Record{Seq: 9, Kind: store.KindEvent, Format: "agentry.log/v99"}
	if err := store.CheckFormat(&bad); !errors.Is(err, store.ErrFormat) {
		t.Errorf("CheckFormat(v99) = %v, want ErrFormat", err)
	}
}

func testAppendLargeBatch(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreate(t, s, newRun("run_a"))
	const n = 1000
	recs := make([]store.Record, n)
	for i := range recs {
		recs[i] = rec(store.KindEvent, i/10, `{"i":`+strconv.Itoa(i)+`}`)
	}
	if err := s.Append(ctx, store.Write{RunID: "run_a", Holder: "h1", Records: recs}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Records(ctx, "run_a", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("Records = %d, want %d", len(got), n)
	}
	for i, r := range got {
		if want := `{"i":` + strconv.Itoa(i) + `}`; string(r.Data) != want || r.Turn != i/10 {
			t.Fatalf("record %d = turn %d %s, want turn %d %s", i, r.Turn, r.Data, i/10, want)
		}
	}
}

func testAppendFenced(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreate(t, s, newRun("run_a"))
	err := s.Append(ctx, store.Write{RunID: "run_a", Holder: "h2", Records: []store.Record{rec(store.KindEvent, 1, `{}`)}})
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("Append by a non-holder = %v, want ErrLeaseLost", err)
	}
	if got, _ := s.Records(ctx, "run_a", 0); len(got) != 0 {
		t.Errorf("a refused append wrote %d records", len(got))
	}
	if err := s.Append(ctx, store.Write{RunID: "run_a", Holder: "h1", Status: "sleeping"}); err == nil {
		t.Error("Append with an unknown status: no error")
	}
	if err := s.Append(ctx, store.Write{RunID: "run_a", Holder: "h1", Status: store.Interrupted}); err == nil {
		t.Error("Append with status interrupted: no error")
	}
}

func testAppendStatusAndSummary(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreate(t, s, newRun("run_a"))
	cost := 0.0125
	sum := store.Summary{Outcome: "success", Turns: 10, Tokens: 1234, CostUSD: &cost, Error: ""}
	if err := s.Append(ctx, store.Write{RunID: "run_a", Holder: "h1", Records: []store.Record{rec(store.KindResult, 10, `{}`)},
		Status: store.Completed, Summary: &sum, Release: true}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "run_a")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.Completed || got.Holder != "" || !got.LeaseUntil.IsZero() {
		t.Errorf("after the final write: status %s, holder %q, lease %v; want completed and released", got.Status, got.Holder, got.LeaseUntil)
	}
	if got.Outcome != "success" || got.Turns != 10 || got.Tokens != 1234 || got.CostUSD == nil || *got.CostUSD != cost {
		t.Errorf("summary = %+v, want %+v", got.Summary, sum)
	}
	if err := s.Append(ctx, store.Write{RunID: "run_a", Holder: "h1"}); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("Append after release = %v, want ErrLeaseLost", err)
	}
}

func testConcurrentAppends(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreate(t, s, newRun("run_a"))
	mustCreate(t, s, newRun("run_b"))
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for _, id := range []string{"run_a", "run_b"} {
		wg.Go(func() {
			for i := range n {
				errs <- s.Append(ctx, store.Write{RunID: id, Holder: "h1", Records: []store.Record{rec(store.KindEvent, i, `{}`)}})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"run_a", "run_b"} {
		got, err := s.Records(ctx, id, 0)
		if err != nil || len(got) != n {
			t.Fatalf("Records(%s) = %d, %v; want %d", id, len(got), err, n)
		}
		for i, r := range got {
			if r.Turn != i {
				t.Fatalf("%s record %d has turn %d: appends of one writer out of order", id, i, r.Turn)
			}
		}
	}
}

func testPrune(t *testing.T, s store.Store) {
	ctx := context.Background()
	old := time.Now().Add(-48 * time.Hour)
	for _, id := range []string{"run_old_done", "run_old_live", "run_old_dead", "run_new_done"} {
		r := newRun(id)
		if id != "run_new_done" {
			r.CreatedAt = old
		}
		if id == "run_old_dead" {
			r.LeaseUntil = time.Now().Add(-time.Minute)
		}
		mustCreate(t, s, r)
		if err := s.Append(ctx, store.Write{RunID: id, Holder: "h1", Records: []store.Record{rec(store.KindStart, 0, `{}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"run_old_done", "run_new_done"} {
		if err := s.Append(ctx, store.Write{RunID: id, Holder: "h1", Status: store.Completed, Release: true}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.Prune(ctx, time.Now().Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("Prune deleted %d runs, want 2 (the old finished one and the old interrupted one)", n)
	}
	for id, kept := range map[string]bool{"run_old_done": false, "run_old_dead": false, "run_old_live": true, "run_new_done": true} {
		_, err := s.Get(ctx, id)
		if kept != (err == nil) {
			t.Errorf("%s: kept %v, want %v (%v)", id, err == nil, kept, err)
		}
		if _, err := s.Records(ctx, id, 0); !kept && !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: its log outlived it (%v)", id, err)
		}
	}
}

func testPins(t *testing.T, s store.Store) {
	p, ok := s.(store.Pins)
	if !ok {
		t.Fatalf("%T does not pin agent versions (store.Pins)", s)
	}
	ctx := context.Background()
	tests := []struct {
		name, version, digest, want string
	}{
		{"adder", "v1", "sha256:aa", "sha256:aa"},
		{"adder", "v1", "sha256:bb", "sha256:aa"}, // the first pin stays
		{"adder", "v2", "sha256:bb", "sha256:bb"},
		{"other", "v1", "sha256:cc", "sha256:cc"},
	}
	for _, tt := range tests {
		got, err := p.Pin(ctx, tt.name, tt.version, tt.digest)
		if err != nil || got != tt.want {
			t.Errorf("Pin(%s@%s, %s) = %q, %v; want %q", tt.name, tt.version, tt.digest, got, err, tt.want)
		}
	}
}

// testBlobs: a blob is kept once under its key and read back byte for
// byte; an unknown key is ErrNotFound.
func testBlobs(t *testing.T, s store.Store) {
	b, ok := s.(store.Blobs)
	if !ok {
		t.Fatalf("%T keeps no blobs (store.Blobs)", s)
	}
	ctx := context.Background()
	data := []byte("\x00binary\xff payload \n")
	if err := b.PutBlob(ctx, "k1", data); err != nil {
		t.Fatal(err)
	}
	if err := b.PutBlob(ctx, "k1", []byte("other")); err != nil {
		t.Fatalf("a second put of a key: %v", err)
	}
	got, err := b.Blob(ctx, "k1")
	if err != nil || string(got) != string(data) {
		t.Errorf("Blob = %q, %v; want the first data", got, err)
	}
	if _, err := b.Blob(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an unknown key: %v; want ErrNotFound", err)
	}
	if err := b.PutBlob(ctx, "", data); err == nil {
		t.Error("an empty key was kept")
	}
}

// testCreateWithRecords: a write that creates its run creates it with its
// records, in one transaction; an id taken creates nothing and appends
// nothing.
func testCreateWithRecords(t *testing.T, s store.Store) {
	ctx := context.Background()
	run := store.Run{ID: "run_created_with", Kind: "agent", Name: "a", Version: "1", Status: store.Running, Holder: "h1",
		LeaseUntil: time.Now().Add(time.Minute)}
	rec := store.Record{Kind: store.KindStart, Data: []byte(`{"kind":"agent"}`)}
	if err := s.Append(ctx, store.Write{RunID: run.ID, Holder: "h1", Create: &run, Records: []store.Record{rec}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, run.ID)
	if err != nil || got.Holder != "h1" || got.Status != store.Running {
		t.Fatalf("created run %+v (%v)", got, err)
	}
	recs, err := s.Records(ctx, run.ID, 0)
	if err != nil || len(recs) != 1 || recs[0].Kind != store.KindStart {
		t.Fatalf("its records %+v (%v); want its start", recs, err)
	}
	other := run
	other.Holder = "h2"
	err = s.Append(ctx, store.Write{RunID: run.ID, Holder: "h2", Create: &other, Records: []store.Record{rec}})
	if !errors.Is(err, store.ErrExists) {
		t.Errorf("creating a run whose id is taken: %v; want ErrExists", err)
	}
	if recs, _ := s.Records(ctx, run.ID, 0); len(recs) != 1 {
		t.Errorf("a refused create appended: %d records", len(recs))
	}
}
