package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
)

// A conversation: three runs, each starting from what was said before
// it. The model here is a Go function that answers from the messages it
// is sent, so the third answer shows that the first message reached it.
func ExampleWithConversation() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "agentry-example")
	defer os.RemoveAll(dir)
	st, err := store.Open(ctx, filepath.Join(dir, "runs.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()

	model := llm.ProviderFunc(func(_ context.Context, req *llm.Request) (*llm.Response, error) {
		var name string
		for _, m := range req.Messages {
			if _, after, ok := strings.Cut(m.Content, "My name is "); ok && m.Role == llm.RoleUser {
				name = strings.TrimSuffix(after, ".")
			}
		}
		last := req.Messages[len(req.Messages)-1].Content
		switch {
		case strings.Contains(last, "My name is"):
			return &llm.Response{Content: "Hello, " + name + "!"}, nil
		case strings.Contains(last, "What is my name?") && name != "":
			return &llm.Response{Content: "Your name is " + name + "."}, nil
		}
		return &llm.Response{Content: fmt.Sprintf("Noted (%d messages so far).", len(req.Messages))}, nil
	})
	a, err := agent.New(&spec.Spec{AgentName: "chat", Version: "v1", SystemText: "You chat.", UserText: "${message}",
		InputKeys: []string{"message"}}, agent.WithProvider(model, "func"))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, message := range []string{"My name is Ada.", "I like tea.", "What is my name?"} {
		res, err := a.Run(ctx, map[string]any{"message": message}, agent.WithStore(st), agent.WithConversation("conv_ada"), agent.WithUser("ada"))
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s -> %s\n", message, res.Result)
	}
	runs, _ := st.List(ctx, store.Filter{Conversation: "conv_ada"})
	fmt.Println(len(runs), "runs in the conversation")
	// Output:
	// My name is Ada. -> Hello, Ada!
	// I like tea. -> Noted (4 messages so far).
	// What is my name? -> Your name is Ada.
	// 3 runs in the conversation
}
