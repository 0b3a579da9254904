package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/agentry/agentry/internal/browsertest"
)

// TestConversationAcrossSurfaces holds one conversation through the
// binary on every surface in turn, over one store: begun in agentry
// chat, read and continued in the viewer (in Chromium) of agentry
// serve, continued over HTTP, then in agentry chat again after the
// server stopped; each run is sent everything said before it, wherever
// it was said.
func TestConversationAcrossSurfaces(t *testing.T) {
	dir := t.TempDir()
	agents := filepath.Join(dir, "agents")
	os.MkdirAll(filepath.Join(agents, "chat"), 0o755)
	os.WriteFile(filepath.Join(agents, "chat", "v1.json"), []byte(`{"agent_name": "chat", "version": "v1", "model_name": "scripted:../../turns.json",
		"system_text": "Chat.", "user_text": "${message}", "input_keys": ["message"]}`), 0o600)
	os.WriteFile(filepath.Join(dir, "turns.json"), []byte(`{"turns": [{"content": "Hello, Ada!"}, {"content": "You said your name is Ada."},
		{"content": "Still Ada, over HTTP."}, {"content": "Back in the terminal, Ada."}]}`), 0o600)
	db := filepath.Join(dir, "runs.db")
	chat := func(stdin string, args ...string) (stdout, stderr string) {
		t.Helper()
		code, stdout, stderr := runStdin(t, stdin, append([]string{"chat", "chat", "--agents", agents, "--db", db}, args...)...)
		if code != 0 {
			t.Fatalf("agentry chat: exit %d\n%s", code, stderr)
		}
		return stdout, stderr
	}

	out, errs := chat("My name is Ada.\n")
	id := regexp.MustCompile(`conversation (conv_\w+)`).FindStringSubmatch(errs)
	if out != "Hello, Ada!\n" || id == nil {
		t.Fatalf("the terminal: %q\n%s", out, errs)
	}
	conv := id[1]

	s := startServe(t, "--agents", agents, "--db", db)
	p := browsertest.Open(t, s.base, 1280, 900)
	p.Open("#/conversations/" + conv)
	p.WaitJS("what was said in the terminal", `[...document.querySelectorAll('.msg.user .text')].map(e => e.textContent).join('|') === 'My name is Ada.' &&
		[...document.querySelectorAll('.msg.agent .text')].some(e => e.textContent === 'Hello, Ada!') && document.querySelector('#message')`)
	p.Do("type a message", chromedp.SendKeys(chromedp.ID("message"), "What is my name?"))
	p.Key("\r")
	p.WaitJS("the answer in the viewer", `[...document.querySelectorAll('.msg.agent .text')].some(e => e.textContent === 'You said your name is Ada.') && !document.querySelector('.msg.live')`)

	code, res := s.call(t, "POST", "/v1/conversations/"+conv+"/messages?wait=true", "", `{"message": "And over HTTP?"}`)
	if code != 200 || res["result"] != "Still Ada, over HTTP." {
		t.Fatalf("over HTTP: %d %v", code, res)
	}
	if got := said(res); got != "My name is Ada.|Hello, Ada!|What is my name?|You said your name is Ada.|And over HTTP?|Still Ada, over HTTP." {
		t.Errorf("the run over HTTP was sent %q", got)
	}
	s.stop(t)

	if out, errs := chat("Back?\n", "--conversation", conv); out != "Back in the terminal, Ada.\n" {
		t.Errorf("the terminal again: %q\n%s", out, errs)
	}
	code, shown, errs := run(t, "conversations", "show", conv, "--db", db)
	want := []string{"> My name is Ada.\nHello, Ada!", "> What is my name?\nYou said your name is Ada.", "> And over HTTP?\nStill Ada, over HTTP.",
		"> Back?\nBack in the terminal, Ada.", "4 runs"}
	for _, w := range want {
		if code != 0 || !strings.Contains(shown, w) {
			t.Errorf("show lacks %q: exit %d\n%s%s", w, code, shown, errs)
		}
	}
}

// said is what a Result's messages say after the system prompt, joined
// by "|".
func said(res map[string]any) string {
	var out []string
	msgs, _ := res["messages"].([]any)
	for _, m := range msgs {
		if m, ok := m.(map[string]any); ok && m["role"] != "system" {
			out = append(out, m["content"].(string))
		}
	}
	return strings.Join(out, "|")
}
