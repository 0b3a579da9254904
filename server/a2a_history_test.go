package server

import (
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// TestA2AContextHistory: with the a2a-go client, every task of a context
// starts from the tasks before it in that context, and a task of another
// context from nothing.
func TestA2AContextHistory(t *testing.T) {
	f := newFixture(t, Config{})
	m := f.serveListener(t)
	c, _ := a2aClient(t, f.http.URL+"/a2a/listener", "")
	first := sent(t, c, say("My name is Ada."))
	next := say("What is my name?")
	next.Message.ContextID = first.ContextID
	second := sent(t, c, next)
	if second.ContextID != first.ContextID || taskAnswer(second) != "Your name is Ada." {
		t.Errorf("the second task of the context: %s %q", second.Status.State, taskAnswer(second))
	}
	if got := strings.Join(m.sent(), "|"); got != "system: Listen.|user: My name is Ada.|assistant: Your name is Ada.|user: What is my name?" {
		t.Errorf("the second task's run was sent %s", got)
	}
	other := sent(t, c, say("What is my name?"))
	if other.ContextID == first.ContextID || taskAnswer(other) != "I do not know." {
		t.Errorf("a task of another context: %s %q", other.ContextID, taskAnswer(other))
	}
	if other.Status.State != a2a.TaskStateCompleted {
		t.Errorf("state %s", other.Status.State)
	}
}
