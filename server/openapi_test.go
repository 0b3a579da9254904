package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// conformance checks responses against the OpenAPI document the server
// serves: every test's every JSON answer goes through it (fixture.do).
var conformance = struct {
	once     sync.Once
	doc      map[string]any
	compiler *jsonschema.Compiler
	mu       sync.Mutex
	schemas  map[string]*jsonschema.Schema
}{schemas: map[string]*jsonschema.Schema{}}

func openAPIDoc(t testing.TB) map[string]any {
	t.Helper()
	c := &conformance
	c.once.Do(func() {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(openAPI))
		if err != nil {
			t.Fatalf("openapi.json: %v", err)
		}
		c.doc = doc.(map[string]any)
		c.compiler = jsonschema.NewCompiler()
		if err := c.compiler.AddResource("openapi.json", doc); err != nil {
			t.Fatalf("openapi.json: %v", err)
		}
	})
	return c.doc
}

// templateOf is the document's path template for a request path, or "".
func templateOf(doc map[string]any, path string) string {
	path, _, _ = strings.Cut(path, "?")
	want := strings.Split(path, "/")
	for tpl := range doc["paths"].(map[string]any) {
		parts := strings.Split(tpl, "/")
		if len(parts) != len(want) {
			continue
		}
		ok := true
		for i, p := range parts {
			if p != want[i] && !(strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}")) {
				ok = false
				break
			}
		}
		if ok {
			return tpl
		}
	}
	return ""
}

// checkResponse validates a JSON response against the document: the
// schema of its route, method and status (each status the operation
// answers is listed: a wrong status is a failure, not a default),
// and the Error schema for a path the document does not have.
func checkResponse(t testing.TB, method, path string, status int, body []byte) {
	t.Helper()
	doc := openAPIDoc(t)
	ptr := "/components/schemas/Error"
	tpl := templateOf(doc, path)
	op, ok := map[string]any(nil), false
	if tpl != "" {
		op, ok = doc["paths"].(map[string]any)[tpl].(map[string]any)[strings.ToLower(method)].(map[string]any)
	}
	if ok { // a route of the document; any other request is answered an Error
		responses := op["responses"].(map[string]any)
		key := strconv.Itoa(status)
		resp, ok := responses[key].(map[string]any)
		if !ok { // every status an operation answers is in the document: no default
			t.Errorf("%s %s: status %d is not in the document", method, tpl, status)
			return
		}
		base := "/paths/" + escape(tpl) + "/" + strings.ToLower(method) + "/responses/" + key
		if ref, ok := resp["$ref"].(string); ok {
			base = strings.TrimPrefix(ref, "#")
		}
		ptr = base + "/content/application~1json/schema"
	}
	c := &conformance
	c.mu.Lock()
	sch, ok := c.schemas[ptr]
	if !ok {
		var err error
		if sch, err = c.compiler.Compile("openapi.json#" + ptr); err != nil {
			c.mu.Unlock()
			t.Errorf("%s %s: schema %s: %v", method, path, ptr, err)
			return
		}
		c.schemas[ptr] = sch
	}
	c.mu.Unlock()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Errorf("%s %s: not JSON: %s", method, path, body)
		return
	}
	if err := sch.Validate(v); err != nil {
		t.Errorf("%s %s (%d) does not match %s:\n%v\n%s", method, path, status, ptr, err, body)
	}
}

func escape(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1") }

// TestOpenAPIRoutes: the document and the server have the same routes,
// and the server serves the document.
func TestOpenAPIRoutes(t *testing.T) {
	f := newFixture(t, Config{})
	doc := openAPIDoc(t)
	var documented []string
	for tpl, ops := range doc["paths"].(map[string]any) {
		for method := range ops.(map[string]any) {
			documented = append(documented, strings.ToUpper(method)+" "+tpl)
		}
	}
	// The API's routes; the viewer's (f.srv.pages: the page and its
	// files) are not the API's, and TestViewerFiles checks them.
	served := slices.Clone(f.srv.patterns)
	slices.Sort(documented)
	slices.Sort(served)
	if fmt.Sprint(documented) != fmt.Sprint(served) {
		t.Errorf("documented %v\nserved     %v", documented, served)
	}
	code, got := f.do(t, "GET", "/openapi.json", "", "")
	if code != 200 || got["openapi"] != "3.1.0" {
		t.Errorf("%d %v", code, got["openapi"])
	}
	var again map[string]any
	json.Unmarshal(openAPI, &again)
	if fmt.Sprint(again["paths"]) != fmt.Sprint(got["paths"]) {
		t.Error("the served document is not the embedded one")
	}
}
