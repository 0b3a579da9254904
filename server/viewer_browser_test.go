package server

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/agentry/agentry/pipeline"
)

// TestViewerLive: a run started over the API appears in the list while
// it goes; opened with the keyboard (j, k, Enter), it is followed live,
// through a dropped stream resumed with Last-Event-ID, to its end, every
// event shown once.
func TestViewerLive(t *testing.T) {
	f, cut := newViewerFixture(t, nil)
	p := openPage(t, f.http.URL, 1280, 900)
	p.Open("")
	p.WaitJS("the empty list", `document.querySelector('.runs-table td.empty')`)
	done := startRun(t, f, "", `{"agent": "trip", "input": {"task": "three days in Lisbon"}}`)
	id := startRun(t, f, "", `{"agent": "stepper", "input": {"task": "step"}}`)
	p.WaitJS("the running run in the list", fmt.Sprintf(`(document.querySelector('%s .badge') || {}).textContent === 'running'`, rowSel(id)))
	p.WaitJS("the other run in the list", fmt.Sprintf(`document.querySelector('%s')`, rowSel(done)))

	// The keyboard: from the filters' last button, Tab goes through the
	// eight columns' sort buttons to the newest row; j to the next, k
	// back, Enter opens it.
	p.Do("focus the filters' last button", chromedp.Focus(chromedp.CSS(".filters button")))
	for range 9 {
		p.Key("\t")
	}
	if got := eval[string](p, `document.activeElement.dataset.runId || document.activeElement.outerHTML`); got != id {
		t.Fatalf("Tab went to %q, want the newest row, %s", got, id)
	}
	p.Key("j")
	if got := eval[string](p, `document.activeElement.dataset.runId`); got != done {
		t.Errorf("j went to %q, want %s", got, done)
	}
	p.Key("k")
	if got := eval[string](p, `getComputedStyle(document.activeElement).outlineStyle`); got == "none" {
		t.Error("the focused row shows no focus")
	}
	p.Key("\r")
	p.WaitJS("the run's page", fmt.Sprintf(`location.hash === '#/runs/%s' && document.querySelector('.conn.c-live')`, id))
	p.WaitJS("its first turn, and the second going", `document.querySelectorAll('.wf-row.k-turn').length === 2 && document.querySelector('.wf-row.k-tool') && document.querySelector('.wf-bar.open')`)
	p.Screenshot("live-wide")
	if got := p.Text(".head-meta .badge"); got != "running" {
		t.Errorf("status %q while it goes", got)
	}

	close(f.release)
	p.WaitJS("its end", `(document.querySelector('.head-meta .badge') || {}).textContent === 'completed' && !document.querySelector('.conn')`)
	if got := p.Text(".answer .text"); got != "released" {
		t.Errorf("the answer shown is %q", got)
	}
	if !cut.resumed() {
		t.Error("the dropped stream was not resumed with Last-Event-ID")
	}
	// Every event once: the ids of the events tab are unique, one run_end.
	p.Click("the events tab", "#tab-events")
	ids := eval[[]string](p, `[...document.querySelectorAll('table.events tbody tr td:first-child')].map(td => td.textContent)`)
	seen := map[string]bool{}
	for _, i := range ids {
		if seen[i] {
			t.Errorf("event %s shown twice: %v", i, ids)
		}
		seen[i] = true
	}
	if n := eval[int](p, `[...document.querySelectorAll('table.events code')].filter(c => c.textContent === 'run_end').length`); n != 1 || len(ids) < 4 {
		t.Errorf("%d events, %d run_end", len(ids), n)
	}
	p.Key("\x1b")
	p.WaitJS("back to the list, on the run's row", fmt.Sprintf(`(document.querySelector('%s .badge') || {}).textContent === 'completed' &&
		document.activeElement.dataset.runId === %q`, rowSel(id), id))
}

// TestViewerRun: a finished run's timeline (turns, model calls and tool
// calls with their durations, tokens and cost), transcript, reasoning,
// and audit; at 1280 and 390 px, with nothing wider than the window. The
// screenshots are saved (and written to docs/ with AGENTRY_VIEWER_DOCS=1).
func TestViewerRun(t *testing.T) {
	f, _ := newViewerFixture(t, nil)
	code, res := f.do(t, "POST", "/v1/runs?wait=true", "", `{"agent": "trip", "input": {"task": "three days in Lisbon"}}`)
	if code != 200 || res["success"] != true {
		t.Fatalf("%d %v", code, res)
	}
	id := res["id"].(string)
	startRun(t, f, "", `{"agent": "waiter", "input": {"task": "wait"}}`)
	f.do(t, "POST", "/v1/runs?wait=true", "", `{"agent": "approve", "input": {"task": "2.0.0"}}`)
	for _, w := range viewports {
		p := openPage(t, f.http.URL, w.width, w.height)
		p.Open("")
		p.WaitJS("the runs", `document.querySelectorAll('.runs-table tbody tr[data-run-id]').length === 3`)
		p.NoOverflow("the list", w.width)
		// Every run's tokens and cost are in sight, as columns in a wide
		// window and as a line under the agent in a narrow one.
		if !eval[bool](p, fmt.Sprintf(`[...document.querySelectorAll('.runs-table tbody tr[data-run-id]')].every(tr =>
			[...tr.querySelectorAll('td.c-opt, .c-sub')].filter(e => { const b = e.getBoundingClientRect(); return b.width > 0 && b.right <= %d + 1 })
				.map(e => e.textContent).join(' ').match(/tokens|\d/) &&
			[...tr.querySelectorAll('td.c-opt:last-child, .c-sub')].some(e => { const b = e.getBoundingClientRect(); return b.width > 0 && b.right <= %d + 1 }))`, w.width, w.width)) {
			t.Errorf("at %d px a run's tokens or cost is out of sight", w.width)
		}
		p.Screenshot("list-" + w.name)
		p.Open("#/runs/" + id)
		p.WaitJS("the timeline", `document.querySelectorAll('.wf-row.k-tool').length === 3 && !document.querySelector('.conn') &&
			(document.querySelector('.head-meta .badge') || {}).textContent === 'completed'`)
		checkTimeline(t, p)
		p.NoOverflow("the timeline", w.width)
		// Opened until it shows its arguments: a render of the timeline
		// may close it again, and the next poll opens it once more.
		p.WaitJS("a tool call opened, its arguments", `(() => {
			const open = document.querySelector('.wf-fold[open]');
			if (open) return !!open.querySelector('.wf-detail pre');
			const s = document.querySelector('.wf-row.k-tool summary');
			if (s) s.click();
			return false })()`)
		shot := p.Screenshot("run-" + w.name)
		docs(t, shot, "viewer-"+w.name+".png")
		for _, tab := range []string{"transcript", "reasoning", "policy", "events"} {
			p.Click("the "+tab+" tab", "#tab-"+tab)
			p.WaitJS("the "+tab+" panel", fmt.Sprintf(`!document.querySelector('#panel-%s').hidden`, tab))
			p.NoOverflow("the "+tab+" tab", w.width)
			p.Screenshot(tab + "-" + w.name)
		}
		p.Click("the transcript tab", "#tab-transcript")
		if got := p.Text("#panel-transcript"); !strings.Contains(got, "kv_set") || !strings.Contains(got, "Sintra") {
			t.Errorf("the transcript: %s", got)
		}
		p.Click("the reasoning tab", "#tab-reasoning")
		if got := p.Text("#panel-reasoning"); !strings.Contains(got, "Confidence") || !strings.Contains(got, "Steps (3)") {
			t.Errorf("the reasoning: %s", got)
		}
	}
}

// TestViewerList: the list filters by status and agent (and says so in
// its link), sorts by a column, and pages by the API's cursor. (The
// second trip is cut short by its cost budget: fewer tokens.)
func TestViewerList(t *testing.T) {
	f, _ := newViewerFixture(t, nil)
	var trips []string
	for _, input := range []string{`{"task": "Lisbon"}`, `{"task": "Lisbon", "constraints": {"maxCost": 0.0000001}}`} {
		_, res := f.do(t, "POST", "/v1/runs?wait=true", "", `{"agent": "trip", "input": `+input+`}`)
		trips = append(trips, res["id"].(string))
	}
	_, paused := f.do(t, "POST", "/v1/runs?wait=true", "", `{"agent": "approve", "input": {"task": "2.0.0"}}`)
	p := openPage(t, f.http.URL, 1280, 900)
	p.Open("#/?limit=2")
	p.WaitJS("the first page", `document.querySelectorAll('.runs-table tbody tr[data-run-id]').length === 2 && !document.querySelector('.pager button:last-child').disabled`)
	rows := `[...document.querySelectorAll('.runs-table tbody tr[data-run-id]')].map(r => r.dataset.runId).join(' ')`
	if got := eval[string](p, rows); got != paused["id"].(string)+" "+trips[1] {
		t.Errorf("the first page: %s", got)
	}
	p.Click("older", ".pager button:last-child")
	p.WaitJS("the second page", fmt.Sprintf(`document.querySelectorAll('.runs-table tbody tr[data-run-id]').length === 1 && document.querySelector('%s')`, rowSel(trips[0])))
	p.Click("newer", ".pager button:first-child")
	p.WaitJS("the first page again", fmt.Sprintf(`document.querySelector('%s')`, rowSel(paused["id"].(string))))

	p.Open("#/")
	p.WaitJS("the agents in the filter", `document.querySelectorAll('#f-agent option').length === 5`)
	p.Do("the runs awaiting approval", chromedp.SetValue(chromedp.ID("f-status"), "awaiting_approval"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#f-status').dispatchEvent(new Event('change', {bubbles: true}))`))
	p.WaitJS("only the paused run", fmt.Sprintf(`location.hash === '#/?status=awaiting_approval' &&
		document.querySelectorAll('.runs-table tbody tr[data-run-id]').length === 1 && document.querySelector('%s')`, rowSel(paused["id"].(string))))
	p.Do("the trip agent's", chromedp.SetValue(chromedp.ID("f-agent"), "trip"), chromedp.SetValue(chromedp.ID("f-status"), ""),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#f-agent').dispatchEvent(new Event('change', {bubbles: true}))`))
	p.WaitJS("only the trips", fmt.Sprintf(`location.hash === '#/?agent=trip' && document.querySelectorAll('.runs-table tbody tr[data-run-id]').length === 2 &&
		document.querySelector('%s') && document.querySelector('%s')`, rowSel(trips[0]), rowSel(trips[1])))
	p.Click("clear", ".filters button")
	p.WaitJS("every run", `location.hash === '#/' && document.querySelectorAll('.runs-table tbody tr[data-run-id]').length === 3`)
	p.Click("sort by tokens", "th[data-key=tokens] button")
	p.WaitJS("the most tokens first", fmt.Sprintf(`document.querySelector('th[data-key=tokens]').getAttribute('aria-sort') === 'descending' &&
		document.querySelector('.runs-table tbody tr:first-child').dataset.runId === %q`, trips[0]))
}

// checkTimeline: the waterfall has each turn with its model call (tokens
// and cost) and its tool calls, bars inside the track.
func checkTimeline(t *testing.T, p *page) {
	t.Helper()
	if n := eval[int](p, `document.querySelectorAll('.wf-row.k-turn').length`); n != 3 {
		t.Errorf("%d turns in the timeline, want 3", n)
	}
	model := p.Text(".wf-row.k-model")
	if !strings.Contains(model, "gpt-4.1-mini") || !strings.Contains(model, "182 in / 61 out") || !strings.Contains(model, "$") {
		t.Errorf("the first model call: %q", model)
	}
	if got := p.Text(".stats"); !strings.Contains(got, "1,041") || !strings.Contains(got, "$0.") {
		t.Errorf("the stats: %q", got)
	}
	bad := eval[int](p, `[...document.querySelectorAll('.wf-bar')].filter(b => {
		const r = b.getBoundingClientRect(), tr = b.parentElement.getBoundingClientRect();
		return r.left < tr.left - 1 || r.right > tr.right + 1 || r.width < 1; }).length`)
	if bad > 0 {
		t.Errorf("%d bars outside their track", bad)
	}
}

// checkTurnsInOrder: in a resumed run's timeline no turn starts before
// the one before it ends, and no call a resumed turn serves from its log
// outlasts the turn (it keeps the duration it took when it ran), but for
// the 3 px a bar is drawn at however short. Its turns take well under a
// millisecond, the events' resolution, so their places are exact here.
func checkTurnsInOrder(t *testing.T, p *page) {
	t.Helper()
	why := eval[string](p, `(() => {
		let turnEnd = -Infinity, prevEnd = -Infinity;
		for (const row of document.querySelectorAll('.wf-row')) {
			const bar = row.querySelector('.wf-bar');
			if (!bar) continue;
			const r = bar.getBoundingClientRect();
			if (row.classList.contains('k-turn')) {
				if (r.left < prevEnd - 4) return 'a turn starts ' + (prevEnd - r.left).toFixed(1) + ' px before the one before it ends';
				turnEnd = prevEnd = r.right;
			} else if (row.classList.contains('k-model') || row.classList.contains('k-tool')) {
				if (r.right > turnEnd + 4) return 'a call outlasts its turn by ' + (r.right - turnEnd).toFixed(1) + ' px';
			}
		}
		return '' })()`)
	if why != "" {
		t.Errorf("the timeline: %s", why)
	}
}

// TestViewerApprove: a run paused for approval shows the call it waits
// on, with its arguments redacted; approved with a click, it goes on
// live to its end, its timeline shows the call once, and the audit
// records the pause and the approval.
func TestViewerApprove(t *testing.T) {
	f, _ := newViewerFixture(t, nil)
	code, res := f.do(t, "POST", "/v1/runs?wait=true", "", `{"agent": "approve", "input": {"task": "2.0.0"}}`)
	if code != 200 || res["terminate_reason"] != "awaiting_approval" {
		t.Fatalf("%d %v", code, res)
	}
	id := res["id"].(string)
	p := openPage(t, f.http.URL, 1280, 900)
	p.Open("#/runs/" + id)
	p.WaitJS("the approval", `document.querySelector('.approval button.approve')`)
	if got := p.Text(".approval"); !strings.Contains(got, "kv_set") || !strings.Contains(got, "call_1_1") || !strings.Contains(got, "[REDACTED") {
		t.Errorf("the approval panel: %q", got)
	}
	p.Screenshot("approval-wide")
	p.Do("a narrow window", chromedp.EmulateViewport(390, 844))
	p.WaitJS("the narrow layout", `window.innerWidth === 390`)
	p.NoOverflow("the approval", 390)
	p.Screenshot("approval-narrow")
	p.Do("a wide window", chromedp.EmulateViewport(1280, 900))
	p.ColorScheme("dark")
	p.WaitJS("the dark colours", `matchMedia('(prefers-color-scheme: dark)').matches`)
	p.Screenshot("approval-dark")
	p.ColorScheme("light")
	p.Click("approve", ".approval button.approve")
	p.WaitJS("the end", `(document.querySelector('.head-meta .badge') || {}).textContent === 'completed' && !document.querySelector('.conn')`)
	if got := p.Text(".answer .text"); got != "The release 2.0.0 is stored." {
		t.Errorf("the answer: %q", got)
	}
	if n := eval[int](p, `document.querySelectorAll('.wf-row.k-tool').length`); n != 1 {
		t.Errorf("%d tool calls in the timeline, want 1", n)
	}
	checkTurnsInOrder(t, p)
	p.Click("the policy tab", "#tab-policy")
	p.WaitJS("the audit records", `document.querySelectorAll('table.audit tbody tr').length >= 2`)
	if got := p.Text("table.audit tbody"); !strings.Contains(got, "pause") || !strings.Contains(got, "approve") {
		t.Errorf("the audit records: %q", got)
	}
	if run, _ := f.st.Get(context.Background(), id); run.Status != "completed" {
		t.Errorf("the run is %s", run.Status)
	}
}

// TestViewerRoles: with keys, the page asks for one (the API answered
// 401), keeps it for the tab, and shows approve and deny only to a key
// that may decide the run's calls (its own user's runner: not a viewer
// that reads every user's runs); a runner's denial is audited under the
// runner's name, and its reason reaches the model.
func TestViewerRoles(t *testing.T) {
	keys := []Key{{Name: "val", SHA256: HashKey("view-key"), Role: RoleViewer, AllUsers: true}, {Name: "rui", SHA256: HashKey("run-key"), Role: RoleRunner}}
	f, _ := newViewerFixture(t, keys)
	code, res := f.do(t, "POST", "/v1/runs?wait=true", "run-key", `{"agent": "approve", "input": {"task": "2.0.0"}}`)
	if code != 200 {
		t.Fatalf("%d %v", code, res)
	}
	id := res["id"].(string)
	p := openPage(t, f.http.URL, 1280, 900)
	p.Open("#/runs/" + id)
	p.WaitJS("the key dialog", `document.querySelector('#key-dialog').open && document.activeElement.id === 'key-input'`)
	p.Do("type the viewer's key", chromedp.SendKeys(chromedp.CSS("#key-input"), "view-key\r"))
	p.WaitJS("the paused run", `document.querySelector('.approval')`)
	if got := p.Text("#who"); got != "val · viewer" {
		t.Errorf("who: %q", got)
	}
	if n := eval[int](p, `document.querySelectorAll('.approval button').length`); n != 0 || !strings.Contains(p.Text(".approval"), "may not approve") {
		t.Errorf("a viewer sees %d buttons: %q", n, p.Text(".approval"))
	}
	p.Do("the runner's key", chromedp.Evaluate[chromedp.Void](`sessionStorage.setItem('agentry.key', 'run-key')`), chromedp.Reload())
	p.WaitJS("the buttons", `document.querySelector('.approval button.approve') && document.querySelector('.approval button.deny')`)
	if got := p.Text("#who"); got != "rui · runner" {
		t.Errorf("who: %q", got)
	}
	// The runner denies the call, saying why: the run goes on without it.
	p.Do("a reason", chromedp.SendKeys(chromedp.ID("deny-reason"), "not this release"))
	p.Click("deny", ".approval button.deny")
	p.WaitJS("the end", `(document.querySelector('.head-meta .badge') || {}).textContent === 'completed' && !document.querySelector('.conn')`)
	p.Click("the policy tab", "#tab-policy")
	p.WaitJS("the denial in the audit", `[...document.querySelectorAll('table.audit tbody tr')].some(tr => tr.innerText.includes('deny') && tr.innerText.includes('rui'))`)
	p.Click("the transcript tab", "#tab-transcript")
	if got := p.Text("#panel-transcript"); !strings.Contains(got, "not this release") {
		t.Errorf("the model was not told why: %q", got)
	}
}

// TestViewerOwner: a runner that reaches every user's runs sees another
// user's paused run, but no approve or deny (it may not decide for that
// user): the page says whose run it is and who may decide it.
func TestViewerOwner(t *testing.T) {
	keys := []Key{{Name: "rui", SHA256: HashKey("run-key"), Role: RoleRunner},
		{Name: "dora", SHA256: HashKey("dora-key"), Role: RoleRunner, AllUsers: true}}
	f, _ := newViewerFixture(t, keys)
	code, res := f.do(t, "POST", "/v1/runs?wait=true", "run-key", `{"agent": "approve", "input": {"task": "2.0.0"}}`)
	if code != 200 {
		t.Fatalf("%d %v", code, res)
	}
	p := openPage(t, f.http.URL, 1280, 900)
	p.Open("#/runs/" + res["id"].(string))
	p.WaitJS("the key dialog", `document.querySelector('#key-dialog').open && document.activeElement.id === 'key-input'`)
	p.Do("dora's key", chromedp.SendKeys(chromedp.CSS("#key-input"), "dora-key\r"))
	p.WaitJS("the paused run", `document.querySelector('.approval')`)
	if n := eval[int](p, `document.querySelectorAll('.approval button').length`); n != 0 || !strings.Contains(p.Text(".approval"), "This run is rui's") {
		t.Errorf("another user's runner sees %d buttons: %q", n, p.Text(".approval"))
	}
	p.Screenshot("viewer-owner-wide")
	narrow := openPage(t, f.http.URL, 390, 844)
	narrow.Open("#/runs/" + res["id"].(string))
	narrow.WaitJS("the key dialog", `document.querySelector('#key-dialog').open && document.activeElement.id === 'key-input'`)
	narrow.Do("dora's key", chromedp.SendKeys(chromedp.CSS("#key-input"), "dora-key\r"))
	narrow.WaitJS("the paused run", `document.querySelector('.approval')`)
	narrow.NoOverflow("another user's paused run", 390)
	narrow.Screenshot("viewer-owner-narrow")
}

// TestViewerCanary: a secret in a run's input and in its tool call's
// arguments is nowhere in the page, whichever view is open.
func TestViewerCanary(t *testing.T) {
	const canary = "sk-proj-CANARYviewer00000000000000000011"
	f, _ := newViewerFixture(t, nil)
	code, res := f.do(t, "POST", "/v1/runs?wait=true", "", `{"agent": "trip", "input": {"task": "use `+canary+`"}}`)
	if code != 200 {
		t.Fatalf("%d %v", code, res)
	}
	_, paused := f.do(t, "POST", "/v1/runs?wait=true", "", `{"agent": "approve", "input": {"task": "use `+canary+`"}}`)
	p := openPage(t, f.http.URL, 1280, 900)
	for _, id := range []string{res["id"].(string), paused["id"].(string)} {
		p.Open("#/runs/" + id)
		p.WaitJS("the run", `document.querySelector('.stats .stat') && !document.querySelector('.conn')`)
		for _, tab := range []string{"timeline", "transcript", "reasoning", "policy", "events"} {
			p.Click("the "+tab+" tab", "#tab-"+tab)
			p.Do("open every fold", chromedp.Evaluate[chromedp.Void](`document.querySelectorAll('details').forEach(d => d.open = true)`))
			html := eval[string](p, `document.documentElement.outerHTML`)
			if strings.Contains(html, "CANARYviewer") {
				t.Errorf("run %s, tab %s: the page holds the secret", id, tab)
			}
		}
		if html := eval[string](p, `document.documentElement.outerHTML`); !strings.Contains(html, "[REDACTED") {
			t.Errorf("run %s: the page shows no redaction at all", id)
		}
	}
}

// TestViewerPipeline: a stored pipeline run shows its stages in the
// order they ran, the path taken, each linked to its stage's run.
func TestViewerPipeline(t *testing.T) {
	f, _ := newViewerFixture(t, nil)
	pl, err := pipeline.FromFile("../examples/pipelines/review.json", pipeline.WithTools(kvRegistry(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	res, err := pl.Run(context.Background(), map[string]any{"task": "store the release"}, pipeline.WithStore(f.st))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, s := range res.Envelope.History {
		want = append(want, s.Stage)
	}
	p := openPage(t, f.http.URL, 1280, 900)
	p.Open("#/runs/" + res.ID)
	p.WaitJS("the stages, shown first", `document.querySelectorAll('.stage-list .stage').length > 0 && !document.querySelector('#panel-stages').hidden`)
	chips := eval[[]string](p, `[...document.querySelectorAll('.path .chip')].map(c => c.textContent)`)
	if strings.Join(chips, " ") != strings.Join(append(want, "end"), " ") {
		t.Errorf("the path shown %v, want %v then end", chips, want)
	}
	p.Screenshot("pipeline-wide")
	p.Click("a stage's run", ".stage a")
	p.WaitJS("the stage's run", `(document.querySelector('.run-title') || {}).textContent.startsWith('planner')`)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err == nil {
		err = os.WriteFile(to, data, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}
