package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentry/agentry/llm"
)

// leaky is a provider that fails with a key in its error, as a hostile
// or careless provider (or proxy) does: "Incorrect API key provided".
type leaky struct{ err error }

func (l leaky) Generate(context.Context, *llm.Request) (*llm.Response, error) { return nil, l.err }

// TestRunErrorRedacted attacks the error Run returns: a provider's error
// that carries a key, in its message or wrapped deeper, reaches neither
// err.Error() nor the *llm.APIError errors.As finds, and errors.Is and
// errors.As still work on it.
func TestRunErrorRedacted(t *testing.T) {
	const key = "sk-proj-CANARYerr0123456789abcdefghijkl"
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"in the API error's message", &llm.APIError{Kind: llm.KindAuth, Provider: "openai", Status: 401, Message: "Incorrect API key provided: " + key}},
		{"wrapped under the API error", &llm.APIError{Kind: llm.KindAuth, Provider: "openai", Status: 401, Err: fmt.Errorf("transport: Bearer %s refused", key)}},
		{"a plain error", fmt.Errorf("proxy said: key=%s", key)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := New(mustSpec(t, `{"agent_name": "g", "version": "v1", "model_name": "m", "retry": {"max_retries": 0}}`), WithProvider(leaky{tc.err}, "test"))
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			res, err := a.Run(context.Background(), map[string]any{"task": "hi"})
			if err == nil {
				t.Fatal("the run did not fail")
			}
			if strings.Contains(err.Error(), "CANARY") || strings.Contains(fmt.Sprintf("%+v", err), "CANARY") {
				t.Errorf("the key is in the error: %v", err)
			}
			if res == nil || res.Error == nil || strings.Contains(res.Error.Message, "CANARY") {
				t.Errorf("the Result's error: %+v", res.Error)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("errors.Is(err, the provider's error) = false: %v", err)
			}
			var api *llm.APIError
			if errors.As(err, &api) && (strings.Contains(api.Message, "CANARY") || strings.Contains(api.Error(), "CANARY") ||
				api.Err != nil && strings.Contains(api.Err.Error(), "CANARY")) {
				t.Errorf("the key is in the APIError errors.As finds: %q", api.Error())
			}
			// The provider's own error is left as it was: others may hold it.
			var orig *llm.APIError
			if errors.As(tc.err, &orig) && !strings.Contains(orig.Error(), "CANARY") {
				t.Errorf("the provider's error was changed in place: %v", orig)
			}
		})
	}
}
