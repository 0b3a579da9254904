package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The prompt store through the binary: two puts give two versions, the
// first unchanged; get, list and render; validate; the policy's prompt
// filters at put; a spec pinned to v1 still renders v1, one without a
// version takes the latest and records which.
func TestPromptThroughTheBinary(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	v1 := writeFile(t, dir, "v1.json", `{"id": "greet", "text": "You greet ${name}.", "required_vars": ["name"], "metadata": {"tags": ["demo"]}}`)
	v2 := writeFile(t, dir, "v2.json", `{"id": "greet", "engine": "go", "text": "You greet {{.name}} warmly.", "required_vars": ["name"]}`)
	cli := func(wantCode int, args ...string) string {
		t.Helper()
		code, out, errs := runCLI(t, append(args, "--db", db)...)
		if code != wantCode {
			t.Fatalf("agentry %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, wantCode, out, errs)
		}
		return out + errs
	}
	if out := cli(0, "prompt", "put", v1, "--by", "ada"); strings.TrimSpace(out) != "greet@1" {
		t.Errorf("first put: %q", out)
	}
	if out := cli(0, "prompt", "put", v2); strings.TrimSpace(out) != "greet@2" {
		t.Errorf("second put: %q", out)
	}
	if out := cli(0, "prompt", "get", "greet@1"); strings.TrimSpace(out) != "You greet ${name}." {
		t.Errorf("get greet@1 after a second put: %q", out)
	}
	var got map[string]any
	json.Unmarshal([]byte(cli(0, "prompt", "get", "greet", "--json")), &got)
	if got["version"] != "2" || got["engine"] != "go" {
		t.Errorf("get greet --json: %v", got)
	}
	if out := cli(0, "prompt", "list"); !strings.Contains(out, "greet@2") || strings.Contains(out, "greet@1") || !strings.Contains(out, "react@v1") {
		t.Errorf("list:\n%s", out)
	}
	if out := cli(0, "prompt", "list", "--all", "--tag", "demo"); !strings.Contains(out, "greet@1") || !strings.Contains(out, "ada") || strings.Contains(out, "greet@2") {
		t.Errorf("list --all --tag demo:\n%s", out)
	}
	// One flag vocabulary with run: --input, and --param as its alias.
	for _, flag := range []string{"--input", "--param"} {
		if out := cli(0, "prompt", "render", "greet@1", flag, "name=Ada"); strings.TrimSpace(out) != "You greet Ada." {
			t.Errorf("render %s: %q", flag, out)
		}
	}
	// Liquid, with its filters, as the AI Agent Proposal's PromptStore lists it.
	liq := writeFile(t, dir, "liquid.json", `{"id": "shout", "engine": "liquid", "text": "{{ name | upcase }}{% if vip %}!{% endif %}"}`)
	cli(0, "prompt", "put", liq)
	if out := cli(0, "prompt", "render", "shout", "--input", "name=Ada", "--input", "vip=yes"); strings.TrimSpace(out) != "ADA!" {
		t.Errorf("render of a liquid template: %q", out)
	}
	if out := cli(2, "prompt", "render", "greet", "--lenient"); !strings.Contains(out, "prompt greet@2: missing variables name") {
		t.Errorf("render without a required variable: %q", out)
	}
	if out := cli(2, "prompt", "get", "nope"); !strings.Contains(out, "no such template") {
		t.Errorf("get nope: %q", out)
	}
	if out := cli(0, "prompt", "get", "react@1"); !strings.Contains(out, "{{") {
		t.Errorf("the built-in ReAct template: %q", out)
	}

	bad := writeFile(t, dir, "bad.json", `{"id": "greet", "text": "Hi ${name}", "required_vars": ["name", "city"]}`)
	if out := cli(2, "prompt", "validate", v1, bad); !strings.Contains(out, "v1.json: ok") || !strings.Contains(out, `required_vars[1] "city": the text does not use it`) {
		t.Errorf("validate:\n%s", out)
	}
	if out := cli(2, "prompt", "put", bad); !strings.Contains(out, `"city"`) {
		t.Errorf("put of an invalid template: %q", out)
	}
	// A version given is kept as written, and never put twice.
	versioned := writeFile(t, dir, "versioned.json", `{"id": "hello", "version": "v7", "text": "x"}`)
	if out := cli(0, "prompt", "put", versioned); strings.TrimSpace(out) != "hello@v7" {
		t.Errorf("put with a version: %q", out)
	}
	if out := cli(2, "prompt", "put", versioned); !strings.Contains(out, "hello@v7 exists") {
		t.Errorf("a version put twice: %q", out)
	}

	pol := writeFile(t, dir, "policy.json", `{"content_filters": [
		{"name": "no-drop", "pattern": "(?i)drop table", "on": ["prompt"], "action": "block"},
		{"name": "mail", "match": "pii", "on": ["prompt"], "action": "redact"}]}`)
	dropper := writeFile(t, dir, "drop.json", `{"id": "ops", "text": "Then DROP TABLE users."}`)
	if out := cli(1, "prompt", "put", dropper, "--policy", pol); !strings.Contains(out, "no-drop") {
		t.Errorf("a blocked put: %q", out)
	}
	if out := cli(2, "prompt", "validate", dropper, "--policy", pol); !strings.Contains(out, "no-drop of the policy blocks") {
		t.Errorf("validate --policy: %q", out)
	}
	mailer := writeFile(t, dir, "mail.json", `{"id": "ops", "text": "Write to ada@example.com about ${topic}."}`)
	cli(0, "prompt", "put", mailer, "--policy", pol)
	if out := cli(0, "prompt", "get", "ops"); strings.TrimSpace(out) != "Write to [REDACTED:pii] about ${topic}." {
		t.Errorf("a redacted put: %q", out)
	}
	if out := cli(0, "audit"); !strings.Contains(out, "content_filters.no-drop") || !strings.Contains(out, "prompt.put") || !strings.Contains(out, "prompt:greet@2") {
		t.Errorf("audit:\n%s", out)
	}

	// Specs that use the templates.
	script := writeFile(t, dir, "turns.json", `{"turns": [{"content": "Hello!"}, {"content": "Hello!"}, {"content": "Hello!"}]}`)
	for _, tc := range []struct{ ref, system, provenance string }{
		{"greet@1", "You greet Ada.", "greet@1"},
		{"greet", "You greet Ada warmly.", "greet@2"},
	} {
		sp := writeFile(t, dir, "agent.json", `{"agent_name": "greeter", "version": "v1", "model_name": "scripted:`+script+`",
			"prompt_ref": "`+tc.ref+`", "input_keys": ["name"]}`)
		var res map[string]any
		json.Unmarshal([]byte(cli(0, "run", sp, "--input", "name=Ada", "--json", "-q")), &res)
		msgs, _ := res["messages"].([]any)
		if len(msgs) == 0 || msgs[0].(map[string]any)["content"] != tc.system || res["prompt_template"] != tc.provenance {
			t.Errorf("prompt_ref %s: messages %v, prompt_template %v", tc.ref, msgs, res["prompt_template"])
		}
	}
	sp := writeFile(t, dir, "agent.json", `{"agent_name": "greeter", "version": "v1", "model_name": "scripted:`+script+`", "prompt_ref": "greet@1"}`)
	if out := cli(2, "run", sp, "-q"); !strings.Contains(out, "missing variables name") {
		t.Errorf("a run without the template's required variable: %q", out)
	}
	cli(0, "validate", sp)
	missing := writeFile(t, dir, "missing.json", `{"agent_name": "greeter", "version": "v1", "model_name": "scripted:`+script+`", "prompt_ref": "greet@9"}`)
	if out := cli(2, "validate", missing); !strings.Contains(out, `prompt_ref "greet@9": prompt: no such template: greet@9`) {
		t.Errorf("validate of a prompt_ref the store lacks: %q", out)
	}
}

// Versions are strings as an agent's are: prompts/greet/v1.json is
// greet@v1, for prompt_ref and the prompt commands; validate takes
// template files, and an invalid one is bad input (exit 2).
func TestPromptVersionsAsWritten(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	prompts := filepath.Join(dir, "prompts")
	os.MkdirAll(filepath.Join(prompts, "greet"), 0o750)
	good := writeFile(t, filepath.Join(prompts, "greet"), "v1.json", `{"id": "greet", "version": "v1", "text": "You greet ${name}.", "required_vars": ["name"]}`)
	writeFile(t, filepath.Join(prompts, "greet"), "v2.json", `{"id": "greet", "version": "v2", "text": "You greet ${name} twice."}`)
	writeFile(t, filepath.Join(prompts, "greet"), "v10.json", `{"id": "greet", "version": "v10", "text": "You greet ${name} ten times."}`)
	bad := writeFile(t, dir, "bad.json", `{"id": "greet", "version": "v3", "text": "Hi ${name}", "required_vars": ["city"]}`)
	script := writeFile(t, dir, "turns.json", `{"turns": [{"content": "Hello!"}]}`)
	sp := writeFile(t, dir, "agent.json", `{"agent_name": "greeter", "version": "v1", "model_name": "scripted:`+script+`",
		"prompt_ref": "greet@v1", "input_keys": ["name"]}`)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"run with prompt_ref greet@v1", []string{"run", sp, "--prompts", prompts, "--input", "name=Ada", "--json", "-q"}, 0, `"prompt_template": "greet@v1"`},
		{"get by the name as written", []string{"prompt", "get", "greet@v1", "--prompts", prompts}, 0, "You greet ${name}."},
		{"the latest is v10, not v2", []string{"prompt", "get", "greet", "--prompts", prompts}, 0, "ten times"},
		{"render", []string{"prompt", "render", "greet@v2", "--prompts", prompts, "--input", "name=Ada"}, 0, "You greet Ada twice."},
		{"validate a template", []string{"validate", good}, 0, "✓"},
		{"validate an invalid template", []string{"validate", bad}, 2, `required_vars[0] "city"`},
		{"validate an invalid template and a spec", []string{"validate", sp, bad, "--prompts", prompts}, 2, "1 invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(t, append(tc.args, "--db", db)...)
			if code != tc.code || !strings.Contains(out+errs, tc.want) {
				t.Errorf("agentry %s: exit %d, want %d and %q\n%s%s", strings.Join(tc.args, " "), code, tc.code, tc.want, out, errs)
			}
		})
	}
}
