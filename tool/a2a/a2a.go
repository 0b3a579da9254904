// Package a2a makes a remote A2A agent a tool: a spec's
// tools entry "a2a:URL" names the agent by its base URL (its card at
// URL/.well-known/agent-card.json) or by its card's URL. The card is read
// when the agent is built, through the A2A project's Go SDK, which then
// speaks A2A 1.0, or 0.3 to an agent that offers only that. The model
// sends the remote agent a message; the observation is the remote task's
// answer.
package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool"
)

// Tool is a remote A2A agent as a tool. Its zero value is not usable:
// use Open. Close lets its client go.
type Tool struct {
	url    string
	http   *http.Client
	card   *sdk.AgentCard
	client *a2aclient.Client
	info   tool.Info
}

// cardTimeout bounds reading the card when the agent is built.
const cardTimeout = 30 * time.Second

// Open reads the card of the A2A agent at raw (its base URL, or its
// card's URL: one that ends in .json) and makes a client for it. client
// carries the calls (nil: http.DefaultClient's transport); each call's
// time is bounded by its context, as the agent's tool timeouts set it.
// Every failure names the URL.
func Open(ctx context.Context, raw string, client *http.Client) (*Tool, error) {
	if err := spec.CheckA2AURL(raw); err != nil {
		return nil, err
	}
	if client == nil {
		client = &http.Client{}
	}
	card, err := readCard(ctx, raw, client)
	if err != nil {
		client.CloseIdleConnections()
		return nil, fmt.Errorf("a2a agent %s: its card: %w", raw, err)
	}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(client), a2aclient.WithRESTTransport(client),
		a2aclient.WithCompatTransport(a2av0.Version, sdk.TransportProtocolJSONRPC, a2av0.NewJSONRPCTransportFactory(a2av0.JSONRPCTransportConfig{Client: client})))
	if err != nil {
		client.CloseIdleConnections()
		return nil, fmt.Errorf("a2a agent %s (%s): %w", raw, card.Name, err)
	}
	desc := card.Description
	for _, s := range card.Skills {
		desc += fmt.Sprintf("\nSkill %s: %s", s.Name, s.Description)
	}
	return &Tool{url: raw, http: client, card: card, client: c, info: tool.Info{
		Name:        tool.NameFor(card.Name),
		Description: strings.TrimSpace(desc + "\nA remote A2A agent: send it a message; its answer is the observation."),
		Parameters:  json.RawMessage(`{"type":"object","properties":{"message":{"type":"string","description":"What to ask the agent."}},"required":["message"],"additionalProperties":false}`),
		// A message may make the remote agent act: it is not repeated
		// blindly.
		Idempotency: tool.NonIdempotent,
	}}, nil
}

// readCard reads the card at raw: raw itself when it names a .json
// file, else the well-known card under it; in A2A 1.0's shape, or
// 0.3's.
func readCard(ctx context.Context, raw string, client *http.Client) (*sdk.AgentCard, error) {
	ctx, cancel := context.WithTimeout(ctx, cardTimeout)
	defer cancel()
	u, _ := url.Parse(raw)
	var opts []agentcard.ResolveOption
	base := raw
	if strings.HasSuffix(u.Path, ".json") {
		opts = append(opts, agentcard.WithPath(u.Path))
		u.Path, u.RawQuery = "", ""
		base = u.String()
	}
	card, err := (&agentcard.Resolver{Client: client}).Resolve(ctx, base, opts...)
	if err == nil && len(card.SupportedInterfaces) > 0 {
		return card, nil
	}
	// A 0.3 card has its endpoint in "url", which 1.0's parser does not
	// read.
	old, oldErr := (&agentcard.Resolver{Client: client, CardParser: a2av0.NewAgentCardParser()}).Resolve(ctx, base, opts...)
	if oldErr == nil && len(old.SupportedInterfaces) > 0 {
		return old, nil
	}
	if err == nil {
		err = oldErr
	}
	if err == nil {
		err = errors.New("the card names no interface to reach the agent at")
	}
	return nil, err
}

// Info implements tool.Tool.
func (t *Tool) Info() tool.Info { return t.info }

// Close lets the client go, and the connections it keeps.
func (t *Tool) Close() error {
	t.http.CloseIdleConnections()
	return t.client.Destroy()
}

// Call sends the model's message to the remote agent and waits for its
// task to end. A task that completes is the observation: its state, its
// answer's text and data, its status message. A task that fails, is
// canceled or rejected, or stops to ask for input or authentication
// (which this tool cannot give), is an error saying so.
func (t *Tool) Call(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
	var in struct {
		Message string `json:"message"`
	}
	if err := json.Unmarshal(args, &in); err != nil || strings.TrimSpace(in.Message) == "" {
		return nil, tool.NewErrorDetails("invalid_arguments", `the call needs {"message": "…"}, the text to send the agent`, true)
	}
	// The agent answers at once with its task; the tool follows it, so
	// that a call cut off by its timeout (or the run's abort) cancels the
	// remote task instead of leaving it working.
	res, err := t.client.SendMessage(ctx, &sdk.SendMessageRequest{Message: sdk.NewMessage(sdk.MessageRoleUser, sdk.NewTextPart(in.Message)),
		Config: &sdk.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		return nil, t.unavailable(ctx, err)
	}
	switch r := res.(type) {
	case *sdk.Message:
		return json.Marshal(observation{State: "completed", Answer: textOf(r.Parts), Data: dataOf(r.Parts)})
	case *sdk.Task:
		task, err := t.follow(ctx, r)
		if err != nil {
			return nil, err
		}
		return t.taskResult(task)
	}
	return nil, fmt.Errorf("a2a agent %s answered a %T", t.card.Name, res)
}

// follow asks for the task until it ends (or stops to ask for something),
// waiting longer each time (50 ms to 1 s); when ctx ends first, the task
// is canceled.
func (t *Tool) follow(ctx context.Context, task *sdk.Task) (*sdk.Task, error) {
	for wait := 50 * time.Millisecond; !settled(task.Status.State); wait = min(2*wait, time.Second) {
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			t.cancel(ctx, task.ID)
			return nil, ctx.Err()
		case <-timer.C:
		}
		next, err := t.client.GetTask(ctx, &sdk.GetTaskRequest{ID: task.ID})
		if err != nil {
			if ctx.Err() != nil {
				t.cancel(ctx, task.ID)
			}
			return nil, t.unavailable(ctx, err)
		}
		task = next
	}
	return task, nil
}

// settled says the task will not go on by itself: it ended, or it waits
// for input or authentication.
func settled(s sdk.TaskState) bool {
	return s.Terminal() || s == sdk.TaskStateInputRequired || s == sdk.TaskStateAuthRequired
}

// cancel cancels a task the call gave up on, within cancelTimeout of its
// own: the call's context has ended.
func (t *Tool) cancel(ctx context.Context, id sdk.TaskID) {
	ctx, stop := context.WithTimeout(context.WithoutCancel(ctx), cancelTimeout)
	defer stop()
	_, _ = t.client.CancelTask(ctx, &sdk.CancelTaskRequest{ID: id})
}

const cancelTimeout = 5 * time.Second

func (t *Tool) unavailable(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return &tool.ErrorDetails{Type: "a2a_unavailable", Recoverable: false,
		Message: fmt.Sprintf("a2a agent %s (%s) did not answer: %v", t.card.Name, t.url, err)}
}

// observation is what the model sees of the remote agent's answer.
type observation struct {
	State   string `json:"state"`
	Answer  string `json:"answer"`
	Data    []any  `json:"data,omitempty"`
	Message string `json:"message,omitempty"` // the task's status message
	TaskID  string `json:"task_id,omitempty"`
}

// taskResult is the observation of a task, or the error of one that did
// not complete.
func (t *Tool) taskResult(task *sdk.Task) (json.RawMessage, error) {
	var status string
	if task.Status.Message != nil {
		status = textOf(task.Status.Message.Parts)
	}
	state := strings.ToLower(strings.TrimPrefix(string(task.Status.State), "TASK_STATE_"))
	if task.Status.State != sdk.TaskStateCompleted {
		what := map[sdk.TaskState]string{
			sdk.TaskStateInputRequired: "asks for more input, which this tool does not give",
			sdk.TaskStateAuthRequired:  "asks for authentication, which this tool does not give",
		}[task.Status.State]
		if what == "" {
			what = "ended " + state
		}
		msg := fmt.Sprintf("a2a agent %s: task %s %s", t.card.Name, task.ID, what)
		if status != "" {
			msg += ": " + status
		}
		return nil, &tool.ErrorDetails{Type: "a2a_task_" + state, Message: msg, Recoverable: false,
			Details: map[string]any{"state": state, "task_id": string(task.ID)}}
	}
	var parts []*sdk.Part
	for _, a := range task.Artifacts {
		parts = append(parts, a.Parts...)
	}
	return json.Marshal(observation{State: state, Answer: textOf(parts), Data: dataOf(parts), Message: status, TaskID: string(task.ID)})
}

// textOf is the parts' text, joined.
func textOf(parts []*sdk.Part) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text())
	}
	return b.String()
}

// dataOf is the parts' data, and their files as references.
func dataOf(parts []*sdk.Part) []any {
	var out []any
	for _, p := range parts {
		switch {
		case p.Data() != nil:
			out = append(out, p.Data())
		case p.URL() != "":
			out = append(out, map[string]any{"file": string(p.URL()), "media_type": p.MediaType})
		}
	}
	return out
}
