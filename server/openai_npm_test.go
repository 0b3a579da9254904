package server

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"testing"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/internal/testdb"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
)

// keeper is a model that, on each call, stores a value with a tool and
// then says so: an agent that uses a tool, as many times as it is run;
// it reports 9 + 4 tokens a call.
type keeper struct{}

func (keeper) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	u := llm.Usage{PromptTokens: 9, CompletionTokens: 4, TotalTokens: 13}
	if req.Messages[len(req.Messages)-1].Role == llm.RoleTool {
		return &llm.Response{Content: "Stored.", Usage: u}, nil
	}
	return &llm.Response{Content: "Storing.", ToolCalls: []llm.ToolCall{{ID: "c1", Name: "kv_set",
		Arguments: json.RawMessage(`{"key": "k", "value": "v"}`)}}, Usage: u}, nil
}

// serveKeeper serves the keeper agent (kv_set, the keeper model) too.
func (f *fixture) serveKeeper(t *testing.T) {
	t.Helper()
	k, err := agent.New(&spec.Spec{AgentName: "keeper", Version: "v1", SystemText: "Store.", Tools: []string{"kv_set"}},
		agent.WithProvider(keeper{}, "test"), agent.WithTools(kvRegistry(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	if err := f.srv.cfg.Agents.Register(k); err != nil {
		t.Fatal(err)
	}
}

// TestOpenAINodeClient: the official npm "openai" client, in Node, calls
// agents through the OpenAI-compatible endpoint, one that uses a tool
// and one that does not: a call, a streamed call with usage, the models,
// and an error it understands.
func TestOpenAINodeClient(t *testing.T) {
	modules := testdb.NPM(t, "openai")
	f := newFixture(t, Config{Keys: []Key{{Name: "rui", SHA256: HashKey("run-key"), Role: RoleRunner}}})
	f.serveKeeper(t)
	close(f.release) // the waiter answers each call at once
	for _, tc := range []struct{ model, answer string }{{"keeper", "Stored."}, {"waiter@v1", "released"}} {
		t.Run(tc.model, func(t *testing.T) {
			cmd := exec.Command("node", "testdata/openai-client.cjs", f.http.URL+"/v1", "run-key", tc.model, "go")
			cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
			out, err := cmd.Output()
			if err != nil {
				var stderr []byte
				if ee, ok := err.(*exec.ExitError); ok {
					stderr = ee.Stderr
				}
				t.Fatalf("node: %v\n%s", err, stderr)
			}
			var got struct {
				Content, Finish, Streamed, StreamedFinish string
				Chunks                                    int
				Usage, StreamedUsage                      map[string]int
				Models                                    []string
				Error                                     struct {
					Status int
					Code   string
				}
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if got.Content != tc.answer || got.Finish != "stop" || got.Usage["total_tokens"] != got.Usage["prompt_tokens"]+got.Usage["completion_tokens"] {
				t.Errorf("the call: %+v", got)
			}
			// The keeper's model reports 9 + 4 tokens a call, two calls a run.
			if tc.model == "keeper" && (got.Usage["prompt_tokens"] != 18 || got.Usage["completion_tokens"] != 8 || got.StreamedUsage["total_tokens"] != 26) {
				t.Errorf("usage %v, streamed %v; want 18 + 8 = 26", got.Usage, got.StreamedUsage)
			}
			if got.Streamed != tc.answer || got.StreamedFinish != "stop" || got.StreamedUsage == nil || got.Chunks < 3 {
				t.Errorf("the streamed call: %+v", got)
			}
			if !slices.Contains(got.Models, "keeper@v1") || got.Error.Status != 404 || got.Error.Code != "model_not_found" {
				t.Errorf("models %v, error %+v", got.Models, got.Error)
			}
		})
	}
}
