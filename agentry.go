// Package agentry is a runtime for LLM agents: a plan → act → reflect
// loop with tool calling and ReAct, agents as versioned JSON, validated
// output, budgets, retries, a full trace with tokens and cost, pipelines,
// memory, policy with audit, real providers and durable runs.
//
// This package holds only the module's version. An agent is built and run
// with package agent:
//
//	a, err := agent.FromFile("agent.json")
//	res, err := a.Run(ctx, map[string]any{"task": "…"})
//
// The binary (cmd/agentry) runs agents defined as JSON, serves them over
// HTTP and shows what they did. See the README and docs/ for the rest.
package agentry

// Version is the module's version, as its release tag names it without
// the "v" (CHANGELOG.md says what each one changed). The binary reports
// it with `agentry version`.
const Version = "0.1.0"
