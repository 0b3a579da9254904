// Command ragstream is the RAGstream Agent Stack in agentry: agents as
// versioned JSON in agents/{name}/{version}.json (examples/agents), the
// AgentFactory (FromDir) and the AgentPrompt (Agent.Prompt: compose, then
// parse and validate a reply your own client got), and the three modes:
// a Chooser, an Extractor and a Writer whose first reply is corrected.
// Offline, from the repository's root:
//
//	go run ./examples/seeds/ragstream
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/agentry/agentry/agent"
	_ "github.com/agentry/agentry/llm/scripted" // the specs' offline models
)

func main() {
	if err := run(os.Stdout, "examples/agents"); err != nil {
		log.Fatal(err)
	}
}

// ownClient stands for the caller's own model client: the Agent Stack
// lets it sit between composing the prompt and checking the reply.
func ownClient(system, user string, format []byte) string {
	return "```json\n{\"system\": \"Python_Programmer\", \"audience\": \"Developer\"}\n```"
}

func run(out io.Writer, dir string) error {
	ctx := context.Background()

	// Chooser, as parts: the factory builds A2@v1, the prompt checks the
	// payload and composes, the reply is parsed, defaults filled, enums
	// checked.
	a2, err := agent.FromDir(dir, "A2@v1")
	if err != nil {
		return err
	}
	defer a2.Close()
	p, err := a2.Prompt(map[string]any{"task": "Write a Python CLI", "purpose": "teach", "context": "a workshop"})
	if err != nil {
		return err
	}
	labels, err := p.ParseAndValidate(ownClient(p.Messages[0].Content, p.Messages[1].Content, p.ResponseFormat))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "chooser: system=%v audience=%v tone=%v (default) depth=%v (default)\n",
		labels["system"], labels["audience"], labels["tone"], labels["response_depth"])

	// Extractor, run whole.
	booking, err := agent.FromDir(dir, "booking@v1")
	if err != nil {
		return err
	}
	defer booking.Close()
	res, err := booking.Run(ctx, map[string]any{"message": "A table for two in Porto on 4 December, please."})
	if err != nil {
		return err
	}
	b := res.Result.(map[string]any)
	fmt.Fprintf(out, "extractor: city=%v date=%v guests=%v\n", b["city"], b["date"], b["guests"])

	// Writer: its first reply breaks the schema (a title too long) and is
	// sent back with the problem named.
	notes, err := agent.FromDir(dir, "release-notes@v1")
	if err != nil {
		return err
	}
	defer notes.Close()
	res, err = notes.Run(ctx, map[string]any{"project": "agentry", "change": "streaming for every provider"})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "writer: title=%q after %d model calls, validated=%v\n", res.Result.(map[string]any)["title"], len(res.ModelCalls), *res.Validated)
	return nil
}
