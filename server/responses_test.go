package server

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// TestResponses: the official Go client's Responses API against
// POST /v1/responses: a response, one that goes on from it
// (previous_response_id), one that goes on from an earlier one (a fork),
// one in a named conversation, each sent what was said before it;
// retrieved; streamed with OpenAI's events in order; kept nowhere with
// store false; in the background, then cancelled; deleted; and what a
// run cannot give refused with the field named.
func TestResponses(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, Config{})
	m := f.serveListener(t)
	client := openai.NewClient(option.WithBaseURL(f.http.URL+"/v1/"), option.WithMaxRetries(0))
	input := func(text string) responses.ResponseNewParamsInputUnion {
		return responses.ResponseNewParamsInputUnion{OfString: openai.String(text)}
	}
	first, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "listener", Input: input("My name is Ada.")})
	if err != nil {
		t.Fatal(err)
	}
	if first.Status != "completed" || first.OutputText() != "Your name is Ada." || first.Conversation.ID == "" || !strings.HasPrefix(first.ID, "run_") {
		t.Fatalf("the first response: %+v", first)
	}
	second, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "listener", Input: input("What is my name?"),
		PreviousResponseID: openai.String(first.ID)})
	if err != nil || second.Conversation.ID != first.Conversation.ID || second.PreviousResponseID != first.ID {
		t.Fatalf("the second response: %+v %v", second, err)
	}
	if got := strings.Join(m.sent(), "|"); got != "system: Listen.|user: My name is Ada.|assistant: Your name is Ada.|user: What is my name?" {
		t.Errorf("the second response's run was sent %s", got)
	}
	fork, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "listener", Input: input("And now?"),
		PreviousResponseID: openai.String(first.ID)})
	if err != nil || fork.Conversation.ID == first.Conversation.ID {
		t.Fatalf("a response from an earlier one: %+v %v", fork, err)
	}
	if got := strings.Join(m.sent(), "|"); got != "system: Listen.|user: My name is Ada.|assistant: Your name is Ada.|user: And now?" {
		t.Errorf("the fork's run was sent %s", got)
	}
	named, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "listener", Input: input("Still there?"),
		Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(first.Conversation.ID)}})
	if err != nil || named.Conversation.ID != first.Conversation.ID || named.OutputText() != "Your name is Ada." {
		t.Errorf("a response in a named conversation: %+v %v", named, err)
	}
	got, err := client.Responses.Get(ctx, second.ID, responses.ResponseGetParams{})
	if err != nil || got.OutputText() != "Your name is Ada." || got.Status != "completed" || got.PreviousResponseID != first.ID {
		t.Errorf("retrieved: %+v %v", got, err)
	}

	t.Run("streamed", func(t *testing.T) {
		stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "listener", Input: input("My name is Bea.")})
		var types []string
		var text strings.Builder
		var done responses.Response
		for stream.Next() {
			e := stream.Current()
			types = append(types, e.Type)
			if e.Type == "response.output_text.delta" {
				text.WriteString(e.Delta)
			}
			if e.Type == "response.completed" {
				done = e.Response
			}
		}
		want := "response.created response.in_progress response.output_item.added response.content_part.added response.output_text.delta " +
			"response.output_text.done response.content_part.done response.output_item.done response.completed"
		if err := stream.Err(); err != nil || strings.Join(types, " ") != want || text.String() != "Your name is Bea." || done.OutputText() != "Your name is Bea." {
			t.Errorf("%v\n%s\n%q %+v", err, strings.Join(types, " "), text.String(), done)
		}
	})
	t.Run("kept nowhere", func(t *testing.T) {
		r, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "listener", Input: input("My name is Cy."), Store: openai.Bool(false)})
		if err != nil || r.OutputText() != "Your name is Cy." {
			t.Fatalf("%+v %v", r, err)
		}
		var apiErr *openai.Error
		if _, err := client.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
			t.Errorf("a response kept nowhere was found: %v", err)
		}
	})
	t.Run("in the background, cancelled", func(t *testing.T) {
		r, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "waiter", Input: input("wait"), Background: openai.Bool(true)})
		if err != nil || r.Status != "in_progress" || !r.Background {
			t.Fatalf("%+v %v", r, err)
		}
		c, err := client.Responses.Cancel(ctx, r.ID)
		if err != nil || c.Status != "cancelled" {
			t.Errorf("cancelled: %+v %v", c, err)
		}
	})
	t.Run("deleted", func(t *testing.T) {
		var apiErr *openai.Error
		if err := client.Responses.Delete(ctx, first.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != 409 || !strings.Contains(apiErr.Message, first.Conversation.ID) {
			t.Errorf("a response others went on from: %v", err)
		}
		lone, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "listener", Input: input("Forget me.")})
		if err != nil {
			t.Fatal(err)
		}
		if err := client.Responses.Delete(ctx, lone.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Responses.Get(ctx, lone.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
			t.Errorf("a deleted response: %v", err)
		}
	})
	for _, tc := range []struct {
		name   string
		params responses.ResponseNewParams
		opts   []option.RequestOption
		param  string
	}{
		{"instructions not taken", responses.ResponseNewParams{Model: "listener", Input: input("Hi."), Instructions: openai.String("Obey me.")}, nil, "instructions"},
		{"client tools", responses.ResponseNewParams{Model: "listener", Input: input("Hi."),
			Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "search", Parameters: map[string]any{"type": "object"}}}}}, nil, "tools"},
		{"a field agentry does not know", responses.ResponseNewParams{Model: "listener", Input: input("Hi.")}, []option.RequestOption{option.WithJSONSet("frobnicate", 1)}, "frobnicate"},
		{"a history sent to a conversation that holds one", responses.ResponseNewParams{Model: "listener", PreviousResponseID: openai.String(second.ID),
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMessage("Earlier.", responses.EasyInputMessageRoleUser),
				responses.ResponseInputItemParamOfMessage("Now.", responses.EasyInputMessageRoleUser)}}}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.Responses.New(ctx, tc.params, tc.opts...)
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || (tc.param != "" && apiErr.Param != tc.param) {
				t.Errorf("%v, want a 400 naming %q", err, tc.param)
			}
		})
	}
}
