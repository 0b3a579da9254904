// Command proposal is the AI Agent Proposal's "HTTP + KV" agent in
// agentry: a service and its per-run sessions, an HTTP tool limited by
// the network policy, a key-value store, a policy that needs a person's
// approval before a write and audits it, a run store the paused run is
// resumed from, deterministically, and the creation rules that let its
// builder make it but not an agent with a shell. Offline:
//
//	go run ./examples/seeds/proposal
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
	_ "github.com/agentry/agentry/store/sqlite"
	"github.com/agentry/agentry/tool"
	"github.com/agentry/agentry/tool/httptool"
	"github.com/agentry/agentry/tool/kv"
)

func main() {
	dir, err := os.MkdirTemp("", "proposal")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := run(os.Stdout, filepath.Join(dir, "runs.db")); err != nil {
		log.Fatal(err)
	}
}

func run(out io.Writer, db string) error {
	ctx := context.Background()
	// The service the agent reads: a price list.
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"item": "espresso", "price_eur": 2.4}`)
	}))
	defer api.Close()

	st, err := store.Open(ctx, db)
	if err != nil {
		return err
	}
	defer st.Close()
	tools, err := tool.NewRegistry(append(kv.Tools(kv.NewStore()), httptool.New(httptool.Options{AllowPrivate: true}))...)
	if err != nil {
		return err
	}
	pol, err := policy.Parse([]byte(`{"network": {"allow_hosts": ["127.0.0.1"], "allow_private": true},
		"approval": {"tools": ["kv_set"]}}`))
	if err != nil {
		return err
	}
	model, err := scripted.New("pricer",
		scripted.Turn{ToolCalls: []scripted.ToolCall{{Name: "http_get", Arguments: map[string]any{"url": api.URL + "/prices/espresso"}}}},
		scripted.Turn{ToolCalls: []scripted.ToolCall{{Name: "kv_set", Arguments: map[string]any{"key": "espresso", "value": 2.4}}}},
		scripted.Turn{Content: "Espresso costs 2.40 EUR; saved."})
	if err != nil {
		return err
	}
	// Role-based access control for agent creation and tool
	// registration: ada, a builder, may create agents with the HTTP and
	// KV tools; everything else (a connector, an MCP server) is an
	// admin's.
	rules := policy.Creation{"*": {"admin"}, "agent:*": {"builder"}, "tool:http_get": {"builder"}, "tool:kv_*": {"builder"}}
	ada := &policy.Principal{UserID: "ada", Roles: []string{"builder"}}
	build := []agent.Option{agent.WithProvider(model.Model(), "scripted"), agent.WithTools(tools), agent.CreatedBy(ada, rules)}
	a, err := agent.New(&spec.Spec{AgentName: "pricer", Version: "v1", SystemText: "You keep prices.",
		Tools: []string{"http_get", "kv_set"}, Policy: pol, Limits: spec.Limits{MaxTurns: 5}}, build...)
	if err != nil {
		return err
	}
	_, err = agent.New(&spec.Spec{AgentName: "cleaner", Version: "v1", SystemText: "You clean up.",
		Tools: []string{"run_command"}, Connectors: map[string]json.RawMessage{"shell": json.RawMessage(`{"dir": "/", "allow": ["rm"]}`)}}, build...)
	fmt.Fprintf(out, "refused: %v\n", err)
	svc := agent.NewService(agent.StoreRuns(st), agent.BuildWith(build...))
	defer svc.Stop(ctx)
	if err := svc.Health(ctx); err != nil {
		return err
	}
	now := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	res, err := svc.RunOnce(ctx, a, map[string]any{"task": "Save the espresso price."},
		agent.WithUser("ada"), agent.WithSeed(1), agent.WithNow(now))
	if !errors.Is(err, agent.ErrAwaitingApproval) {
		return fmt.Errorf("want a pause for approval, got %v", err)
	}
	fmt.Fprintf(out, "paused: %s, waiting for %v\n", res.TerminateReason, res.Waiting[0].Tool)

	// A person approves: the run goes on from its log.
	res, err = svc.Resume(ctx, res.ID, agent.Approve(res.Waiting[0].Key))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "answer: %v\n", res.Result)
	fmt.Fprintf(out, "tools: %v, deterministic: %v, started: %s\n", res.ToolsUsed, res.Deterministic, res.StartedAt.Format(time.RFC3339))
	audit, err := st.AuditLog(ctx, res.ID)
	if err != nil {
		return err
	}
	for _, rec := range audit {
		fmt.Fprintf(out, "audit: %s %s %s by %s\n", rec.Rule, rec.Decision, rec.Target, rec.UserID)
	}
	stored, err := st.Get(ctx, res.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "stored: %s (%s), trace with: agentry trace %s\n", stored.Status, stored.Summary.Outcome, res.TraceRef)
	return nil
}
