package server

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentry/agentry/store"
	"github.com/chromedp/chromedp"
)

// TestViewerConversation: a person starts a conversation from the list,
// says something in the composer, approves the call the run waits for
// inline (asked again when the page is opened anew), and reads the answer linked to its run's trace; the chat
// reads at a wide and a narrow width (written to docs/ with
// AGENTRY_VIEWER_DOCS=1), and the list shows it.
func TestViewerConversation(t *testing.T) {
	f, _ := newViewerFixture(t, nil)
	p := openPage(t, f.http.URL, 1280, 900)
	p.Open("#/conversations")
	p.WaitJS("the empty list and the form", `document.querySelector('.conversations-table td.empty') && document.querySelector('#new-agent option[value="approve@v1"]')`)
	p.Do("pick the agent", chromedp.SetValue(chromedp.ID("new-agent"), "approve@v1"))
	p.Click("start", ".new-conversation button.primary")
	p.WaitJS("the chat", `location.hash.startsWith('#/conversations/conv_') && document.querySelector('#message')`)
	id := strings.TrimPrefix(eval[string](p, `location.hash`), "#/conversations/")
	p.Do("type a message", chromedp.SendKeys(chromedp.ID("message"), "Store release 2.0.0"))
	p.Key("\r")
	p.WaitJS("the message, and the call it waits for", `document.querySelector('.msg.user .text') &&
		document.querySelector('.msg.user .text').textContent === 'Store release 2.0.0' && document.querySelector('.approval.inline button.approve')`)
	if got := p.Text(".approval.inline"); !strings.Contains(got, "kv_set") || !strings.Contains(got, "[REDACTED") {
		t.Errorf("the call waiting: %q", got)
	}
	docs(t, p.Screenshot("conversation-approval-wide"), "viewer-conversation-approval.png")
	// Opened again, the chat asks about the call the stored run waits for.
	p.Do("reload", chromedp.Reload())
	p.WaitJS("the call asked about again", `document.querySelectorAll('.msg.user').length === 1 &&
		document.querySelector('.msg.live .approval.inline button.approve') && !document.querySelector('.msg.agent:not(.live)')`)
	p.Click("approve", ".approval.inline button.approve")
	p.WaitJS("the answer", `[...document.querySelectorAll('.msg.agent .text')].some(e => e.textContent === 'The release 2.0.0 is stored.') && !document.querySelector('.msg.live')`)
	runID := eval[string](p, `decodeURIComponent(document.querySelector('.msg.agent .trace-link').getAttribute('href').replace('#/runs/', ''))`)
	if run, err := f.st.Get(t.Context(), runID); err != nil || run.Status != "completed" || run.Conversation != id {
		t.Errorf("the run the answer links to: %+v %v", run, err)
	}
	docs(t, p.Screenshot("conversation-wide"), "viewer-conversation-wide.png")
	p.Do("a narrow window", chromedp.EmulateViewport(390, 844))
	p.WaitJS("the narrow layout", `window.innerWidth === 390`)
	p.NoOverflow("the chat", 390)
	docs(t, p.Screenshot("conversation-narrow"), "viewer-conversation-narrow.png")
	p.Do("a wide window", chromedp.EmulateViewport(1280, 900))

	// A message while nothing goes: the script is spent, and the error
	// shows in the chat, not as a lost message.
	p.Do("type again", chromedp.SendKeys(chromedp.ID("message"), "And again"))
	p.Key("\r")
	p.WaitJS("the failed answer", `document.querySelectorAll('.msg.user').length === 2 && document.querySelector('.msg.agent .error-box') && !document.querySelector('.msg.live')`)

	p.Click("back to the list", ".crumbs a")
	p.WaitJS("the list, with it", `document.querySelector('tr[data-conv-id="`+id+`"]')`)
	if got := p.Text(`tr[data-conv-id="` + id + `"]`); !strings.Contains(got, "approve@v1") || !strings.Contains(got, "2") {
		t.Errorf("the list's row: %q", got)
	}
	p.Screenshot("conversations-wide")
}

// TestViewerConversationStreams: the chat shows the answer as the model
// writes it: its first piece while the run goes on, then the rest.
func TestViewerConversationStreams(t *testing.T) {
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := streamServer(t, st)
	_, conv := f.do(t, "POST", "/v1/conversations", "", `{}`)
	p := openPage(t, f.http.URL, 1280, 900)
	p.Open("#/conversations/" + conv["id"].(string))
	p.WaitJS("the composer", `document.querySelector('#message')`)
	p.Do("type a message", chromedp.SendKeys(chromedp.ID("message"), "Hi."))
	p.Key("\r")
	p.WaitJS("the first piece, the run going on", `(document.querySelector('.msg.live') || {}).textContent?.includes('Hello, Ada.')`)
	if got := p.Text(".msg.live"); strings.Contains(got, "Bye!") {
		t.Fatalf("the rest showed before it was written: %q", got)
	}
	close(f.release) // the model writes the rest
	p.WaitJS("the whole answer, stored", `!document.querySelector('.msg.live') && [...document.querySelectorAll('.msg.agent .text')].some(e => e.textContent.endsWith('Bye!'))`)
}
