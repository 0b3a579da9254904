package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentry/agentry/internal/syncbuf"
	"github.com/agentry/agentry/store"
)

// chatDir writes a chat agent (its one input key the message, kv_set
// under approval) and its script of turns, and returns the spec's path.
func chatDir(t *testing.T, turns string) string {
	t.Helper()
	dir := t.TempDir()
	spec := filepath.Join(dir, "agent.json")
	os.WriteFile(spec, []byte(`{"agent_name": "chat", "version": "v1", "model_name": "scripted:turns.json", "system_text": "Chat.",
		"user_text": "${message}", "input_keys": ["message"], "tools": ["kv_set"], "policy": {"approval": {"tools": ["kv_set"]}}}`), 0o600)
	os.WriteFile(filepath.Join(dir, "turns.json"), []byte(turns), 0o600)
	return spec
}

// runWith runs the CLI in this process with stdin.
func runWith(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = execute(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// TestChatPiped: with a pipe on stdin, each line is a message or the
// answer to an approval; the agent answers from what was said before,
// /fork goes on in a fork that knows it, /new in a conversation that
// does not (its scripted model starts its script again); agentry conversations lists, shows, forks and deletes them.
func TestChatPiped(t *testing.T) {
	spec := chatDir(t, `{"turns": [{"content": "Hello, Ada!"},
		{"content": "Saving.", "tool_calls": [{"name": "kv_set", "arguments": {"key": "name", "value": "Ada"}}]},
		{"content": "Saved."}, {"content": "You are Ada."}, {"content": "You are still Ada."}]}`)
	db := filepath.Join(t.TempDir(), "runs.db")
	code, out, errs := runWith(t, "My name is Ada.\nRemember it.\ny\nWho am I?\n/fork\nAnd now?\n/new\nAnd now?\n/exit\nnot read\n",
		"chat", spec, "--db", db)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	want := "Hello, Ada!\nSaving.\napprove kv_set {\"key\": \"name\", \"value\": \"Ada\"}? [y/N] Saved.\nYou are Ada.\nYou are still Ada.\nHello, Ada!\n"
	if out != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", out, want)
	}
	for _, w := range []string{"conversation conv_", "→ kv_set", "forked from conv_"} {
		if !strings.Contains(errs, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errs)
		}
	}
	if strings.Contains(out+errs, "not read") {
		t.Error("a line after /exit was read")
	}

	code, list, errs := run(t, "conversations", "--db", db, "--json")
	var convs []store.Conversation
	if err := json.Unmarshal([]byte(list), &convs); code != 0 || err != nil || len(convs) != 3 {
		t.Fatalf("conversations: exit %d, %v\n%s%s", code, err, list, errs)
	}
	var first, fork store.Conversation
	for _, c := range convs {
		switch {
		case c.ForkedFrom != "":
			fork = c
		case c.Runs == 3:
			first = c
		}
	}
	if fork.ForkedFrom != first.ID || first.ID == "" {
		t.Fatalf("the conversations: %+v", convs)
	}
	code, shown, _ := run(t, "conversations", "show", first.ID, "--db", db)
	for _, w := range []string{"> My name is Ada.\nHello, Ada!", "> Remember it.\nSaved.", "> Who am I?\nYou are Ada.", "3 runs"} {
		if code != 0 || !strings.Contains(shown, w) {
			t.Errorf("show lacks %q:\n%s", w, shown)
		}
	}
	code, forked, _ := run(t, "conversations", "fork", first.ID, "--db", db)
	if code != 0 || !strings.HasPrefix(forked, "conv_") {
		t.Errorf("fork: exit %d %q", code, forked)
	}
	code, deleted, errs := run(t, "conversations", "delete", first.ID, "--db", db, "--by", "ada")
	if code != 0 || deleted != "deleted conversation "+first.ID+" and its 3 runs\n" {
		t.Errorf("delete: exit %d %q %s", code, deleted, errs)
	}
	if code, _, errs := run(t, "conversations", "show", first.ID, "--db", db); code == 0 || !strings.Contains(errs, "conversation not found") {
		t.Errorf("show after delete: exit %d %s", code, errs)
	}
	// The fork still knows what was said.
	code, out, _ = runWith(t, "Who am I?\n", "chat", spec, "--db", db, "--conversation", strings.TrimSpace(forked))
	if code != 0 || out != "You are still Ada.\n" { // the script goes on where the original left off
		t.Errorf("the fork after the original went: exit %d %q", code, out)
	}
	runs, _ := openRuns(t, db).List(context.Background(), store.Filter{Conversation: strings.TrimSpace(forked)})
	if len(runs) != 1 {
		t.Fatalf("the fork's runs: %+v", runs)
	}
	code, trace, _ := run(t, "trace", runs[0].ID, "--db", db, "--json")
	var sent struct{ Messages []struct{ Content string } }
	json.Unmarshal([]byte(trace), &sent)
	if code != 0 || len(sent.Messages) != 11 || sent.Messages[1].Content != "My name is Ada." || sent.Messages[8].Content != "You are Ada." || sent.Messages[10].Content != "You are still Ada." {
		t.Errorf("the fork's run was not sent what was said before it: %+v", sent.Messages)
	}
}

// pty is a pseudo-terminal: the test writes to and reads from its
// master; the process under test has the other end as its terminal.
type pty struct {
	master *os.File
	mu     sync.Mutex
	out    bytes.Buffer
}

func openPTY(t *testing.T) (*pty, *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := &pty{master: m}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := m.Read(buf)
			p.mu.Lock()
			p.out.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return p, s
}

// shown is what the terminal showed so far.
func (p *pty) shown() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// waitFor waits until the terminal shows want after from (an offset in
// what it showed), and returns where it ends.
func (p *pty) waitFor(t *testing.T, from int, want string) int {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		p.mu.Lock()
		seen := p.out.String()
		p.mu.Unlock()
		if i := strings.Index(seen[min(from, len(seen)):], want); i >= 0 {
			return from + i + len(want)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the terminal did not show %q; it shows:\n%s", want, seen[min(from, len(seen)):])
		}
	}
}

// TestChatOnATerminal drives agentry chat through a pseudo-terminal as a
// person would: a prompt, answers that stream as they are written, Ctrl-C at an approval's question and
// while the model thinks, each aborting the run and not the chat, and
// /exit.
func TestChatOnATerminal(t *testing.T) {
	// The first answer comes a word each quarter second: what streams
	// shows long before the last word is written (the run's events keep
	// 64 bytes back, for the redactor).
	spec := chatDir(t, `{"turns": [{"content": "Hello, Ada! It is good to meet you, and I will keep your name in mind from now on, whatever we talk about next.", "chunk_delay_ms": 250},
		{"content": "Saving.", "tool_calls": [{"name": "kv_set", "arguments": {"key": "name", "value": "Ada"}}]},
		{"content": "Pondering.", "delay_ms": 60000}, {"content": "You are Ada."}]}`)
	db := filepath.Join(t.TempDir(), "runs.db")
	p, tty := openPTY(t)
	cmd := exec.Command(binary(t), "chat", spec, "--db", db)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	done := make(chan error, 1)
	exited := make(chan struct{})
	go func() { done <- cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		p.master.Close()
	})
	type step struct{ send, expect string }
	at := p.waitFor(t, 0, "> ")
	p.master.WriteString("My name is Ada.\n")
	at = p.waitFor(t, at, "Hello,")
	if shown := p.shown(); strings.Contains(shown[at:], "next.") { // written two seconds after what shows first
		t.Errorf("the answer was not streamed: it showed whole, %q", shown[at:])
	}
	for _, s := range []step{
		{"", "talk about next."},
		{"", "> "},
		{"Remember it.\n", "[y/N] "},
		{"\x03", "(aborted)"}, // Ctrl-C at the question
		{"", "> "},
		{"Take your time.\n", "Take your time."}, // the echo
	} {
		if s.send != "" {
			p.master.WriteString(s.send)
		}
		at = p.waitFor(t, at, s.expect)
	}
	waitRunning(t, db) // the model is thinking
	p.master.WriteString("\x03")
	at = p.waitFor(t, at, "(aborted)")
	at = p.waitFor(t, at, "> ")
	p.master.WriteString("Who am I?\n")
	at = p.waitFor(t, at, "You are Ada.")
	p.master.WriteString("/exit\n")
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("chat exited with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("chat did not exit")
	}
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, _ := st.List(context.Background(), store.Filter{Kind: "agent"})
	if len(runs) != 4 || runs[1].Status != store.Aborted || runs[2].Status != store.Aborted || runs[0].Conversation == "" || runs[0].Conversation != runs[3].Conversation {
		t.Errorf("the runs: %+v", runs)
	}
	// Aborted at the question: the call was never made.
	recs, err := st.Records(context.Background(), runs[2].ID, 0)
	for _, r := range recs {
		if r.Kind == store.KindToolResult {
			t.Errorf("the run aborted at its question has a %s record", r.Kind)
		}
	}
	if err != nil || len(recs) == 0 {
		t.Errorf("the aborted run's records: %v", err)
	}
}

// openRuns opens the run store db for the test.
func openRuns(t *testing.T, db string) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// waitRunning waits until the chat's store shows a run under way.
func waitRunning(t *testing.T, db string) {
	t.Helper()
	st := openRuns(t, db)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if runs, err := st.List(context.Background(), store.Filter{Status: store.Running}); err == nil && len(runs) > 0 {
			return
		}
	}
	t.Fatal("no run began")
}

// TestChatSettlesWhatWasLeft: a chat killed while a call waits for
// approval leaves the conversation held; the next chat in it (the
// binary: an approval through it) asks about that call first (the
// message is read, then the answer), then sends its own message.
func TestChatSettlesWhatWasLeft(t *testing.T) {
	spec := chatDir(t, `{"turns": [{"content": "Saving.", "tool_calls": [{"name": "kv_set", "arguments": {"key": "name", "value": "Ada"}}]},
		{"content": "Saved."}, {"content": "You are Ada."}]}`)
	db := filepath.Join(t.TempDir(), "runs.db")
	first := exec.Command(binary(t), "chat", spec, "--db", db)
	stdin, _ := first.StdinPipe()
	out := &syncbuf.Buffer{}
	first.Stdout, first.Stderr = out, out
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	stdin.Write([]byte("My name is Ada. Remember it.\n"))
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(out.String(), "[y/N] "); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no question:\n%s", out)
		}
	}
	first.Process.Kill()
	first.Wait()
	id := regexp.MustCompile(`conversation (conv_\w+)`).FindStringSubmatch(out.String())
	if id == nil {
		t.Fatalf("no conversation id:\n%s", out)
	}
	code, stdout, errs := runStdin(t, "Who am I?\ny\n", "chat", spec, "--db", db, "--conversation", id[1])
	if code != 0 || !strings.Contains(errs, "waits for approval: it goes on first") {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	// What the run said before it paused is shown again, then its question.
	if want := "Saving.\napprove kv_set {\"key\": \"name\", \"value\": \"Ada\"}? [y/N] Saved.\nYou are Ada.\n"; stdout != want {
		t.Errorf("stdout %q, want %q", stdout, want)
	}
	runs, _ := openRuns(t, db).List(context.Background(), store.Filter{Conversation: id[1]})
	if len(runs) != 2 || runs[0].Status != store.Completed || runs[1].Status != store.Completed {
		t.Errorf("the conversation's runs: %+v", runs)
	}
}
