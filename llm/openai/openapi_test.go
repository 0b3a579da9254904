package openai

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentry/agentry/internal/wiretest"
)

// The OpenAI API's own OpenAPI description, kept beside the project (not
// copied into it): every request body these tests make the provider send
// is validated against components.schemas.CreateChatCompletionRequest.
var openapiPath = filepath.Join("..", "..", "..", "shared", "specs", "openai", "openapi.json")

var (
	openapiOnce   sync.Once
	openapiSchema *jsonschema.Schema
	openapiProps  map[string]bool
	openapiErr    error
)

func loadOpenAPI() {
	data, err := os.ReadFile(openapiPath)
	if err != nil {
		openapiErr = err
		return
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		openapiErr = err
		return
	}
	schemas := doc.(map[string]any)["components"].(map[string]any)["schemas"].(map[string]any)
	doc = nullable(doc)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("mem:///openapi.json", doc); err != nil {
		openapiErr = err
		return
	}
	openapiSchema, openapiErr = c.Compile("mem:///openapi.json#/components/schemas/CreateChatCompletionRequest")
	openapiProps = map[string]bool{}
	collectProps(schemas, schemas["CreateChatCompletionRequest"], openapiProps)
}

// nullable rewrites OpenAPI 3.0's "nullable: true", which the file still
// uses in places, as JSON Schema: null is then one of the allowed types.
func nullable(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = nullable(e)
		}
		if x["nullable"] != true {
			return x
		}
		delete(x, "nullable")
		if t, ok := x["type"].(string); ok {
			x["type"] = []any{t, "null"}
			if enum, ok := x["enum"].([]any); ok {
				x["enum"] = append(enum, nil)
			}
			return x
		}
		return map[string]any{"anyOf": []any{x, map[string]any{"type": "null"}}}
	case []any:
		for i, e := range x {
			x[i] = nullable(e)
		}
	}
	return v
}

// collectProps gathers the property names a schema documents, following
// $ref and allOf, so that an undocumented field in a request is caught
// even though the description allows additional properties.
func collectProps(schemas map[string]any, s any, out map[string]bool) {
	m, ok := s.(map[string]any)
	if !ok {
		return
	}
	if ref, ok := m["$ref"].(string); ok {
		collectProps(schemas, schemas[strings.TrimPrefix(ref, "#/components/schemas/")], out)
	}
	if props, ok := m["properties"].(map[string]any); ok {
		for k := range props {
			out[k] = true
		}
	}
	if all, ok := m["allOf"].([]any); ok {
		for _, e := range all {
			collectProps(schemas, e, out)
		}
	}
}

// checkOpenAPI validates a request body against the OpenAI description.
func checkOpenAPI(t *testing.T, body []byte) {
	t.Helper()
	openapiOnce.Do(loadOpenAPI)
	if openapiErr != nil {
		if os.IsNotExist(openapiErr) {
			t.Skipf("the OpenAI description is not beside the project (%s): %v", openapiPath, openapiErr)
		}
		t.Fatalf("loading the OpenAI description: %v", openapiErr)
	}
	if problems := openapiProblems(body); problems != "" {
		t.Errorf("request body does not match CreateChatCompletionRequest:\n%s\nbody: %s", problems, body)
	}
}

func openapiProblems(body []byte) string {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return "not JSON: " + err.Error()
	}
	var out []string
	if err := openapiSchema.Validate(v); err != nil {
		out = append(out, err.Error())
	}
	var top map[string]json.RawMessage
	json.Unmarshal(body, &top)
	var unknown []string
	for k := range top {
		if !openapiProps[k] {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		out = append(out, "undocumented fields: "+strings.Join(unknown, ", "))
	}
	return strings.Join(out, "\n")
}

// TestOpenAPICheckCatchesMistakes proves the check can fail.
func TestOpenAPICheckCatchesMistakes(t *testing.T) {
	checkOpenAPI(t, []byte(`{"model": "gpt-4.1", "messages": [{"role": "user", "content": "x"}]}`))
	for body, want := range map[string]string{
		`{"model": "gpt-4.1", "messages": []}`:                                                         "minItems",
		`{"model": "gpt-4.1", "messages": [{"role": "user", "content": "x"}], "temperature": "hot"}`:   "temperature",
		`{"model": "gpt-4.1", "messages": [{"role": "wizard", "content": "x"}]}`:                       "messages",
		`{"model": "gpt-4.1", "messages": [{"role": "user", "content": "x"}], "max_output_tokens": 5}`: "undocumented fields: max_output_tokens",
		`{"messages": [{"role": "user", "content": "x"}]}`:                                             "model",
	} {
		if got := openapiProblems([]byte(body)); !strings.Contains(got, want) {
			t.Errorf("%s: problems %q lack %q", body, got, want)
		}
	}
}

// newServer is the fake OpenAI server of these tests: when the test ends,
// every request body it received is validated against the description.
func newServer(t *testing.T, replies ...wiretest.Reply) *wiretest.Server {
	t.Helper()
	s := wiretest.New(t, replies...)
	t.Cleanup(func() {
		openapiOnce.Do(loadOpenAPI)
		if openapiErr != nil {
			t.Logf("request bodies not checked: %v", openapiErr)
			return
		}
		for i, r := range s.Requests() {
			if problems := openapiProblems(r.Body); problems != "" {
				t.Errorf("request %d does not match CreateChatCompletionRequest:\n%s\nbody: %s", i+1, problems, r.Body)
			}
		}
	})
	return s
}
