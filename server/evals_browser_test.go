package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestViewerEvals: the evaluations in the viewer, at 1280 and 390 px
// (nothing wider than the window): the list, newest first, with each
// one's agents and pass rates; an evaluation's figures per agent, the
// comparison of its two agents, and its cases × agents, each failed
// check's type and reason shown, each cell linked to its run's trace.
// The screenshots are saved (and written to docs/ with
// AGENTRY_VIEWER_DOCS=1).
func TestViewerEvals(t *testing.T) {
	f, _ := newViewerFixture(t, nil)
	sides, v3, rescore := storedEvals(t, f.st)
	for _, w := range viewports {
		p := openPage(t, f.http.URL, w.width, w.height)
		p.Open("")
		p.WaitJS("the runs", `document.querySelector('.runs-table tbody tr[data-run-id]')`)
		p.Click("the evaluations", `.top-nav a[data-nav=evals]`)
		p.WaitJS("the evaluations", `location.hash === '#/evals' && document.querySelectorAll('tr[data-eval-id]').length === 3 &&
			document.querySelector('.top-nav a[data-nav=evals]').getAttribute('aria-current') === 'page'`)
		rows := eval[[]string](p, `[...document.querySelectorAll('tr[data-eval-id]')].map(r => r.dataset.evalId)`)
		if strings.Join(rows, " ") != strings.Join([]string{rescore.ID, v3.ID, sides.ID}, " ") {
			t.Errorf("the evaluations shown: %v", rows)
		}
		// (textContent: a narrow window hides the summary, the agents' rates say it.)
		if got := eval[string](p, fmt.Sprintf(`document.querySelector('%s').textContent`, rowOf(sides.ID))); !strings.Contains(got, "support-triage") || !strings.Contains(got, "triage@v1 80%") ||
			!strings.Contains(got, "triage@v2 80%") || !strings.Contains(got, "8/10 passed") {
			t.Errorf("the first evaluation's row: %q", got)
		}
		if got := p.Text(rowOf(rescore.ID)); !strings.Contains(got, "rescore") {
			t.Errorf("the rescore's row: %q", got)
		}
		p.NoOverflow("the evaluations", w.width)
		p.Screenshot("evals-list-" + w.name)

		// Clicked by script: the list is drawn anew as it refreshes, and a
		// click by position may find its row replaced.
		p.Do("open the first", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector('%s td').click()`, rowOf(sides.ID))))
		p.WaitJS("its report", fmt.Sprintf(`location.hash === '#/evals/%s' && document.querySelectorAll('.agent-card').length === 2 &&
			document.querySelectorAll('.cases-table tbody tr').length === 5`, sides.ID))
		checkEvalPage(t, p)
		p.NoOverflow("the evaluation", w.width)
		shot := p.Screenshot("evals-report-" + w.name)
		docs(t, shot, "viewer-evals-"+w.name+".png")

		p.Open("#/evals/" + v3.ID + "?vs=" + sides.ID + "&base=triage@v2")
		p.WaitJS("the comparison", `document.querySelector('.cmp-table') && document.querySelectorAll('.cases-table tbody tr').length === 5`)
		checkComparePage(t, p)
		p.NoOverflow("the comparison", w.width)
		shot = p.Screenshot("evals-compare-" + w.name)
		docs(t, shot, "viewer-evals-compare-"+w.name+".png")
	}
}

// checkEvalPage: v1 and v2's figures, v2 against v1 (crash fixed,
// password broken), and the cases' verdicts with the failed checks.
func checkEvalPage(t *testing.T, p *page) {
	t.Helper()
	card := p.Text(".agent-card")
	for _, want := range []string{"triage@v1", "4/5 passed", "80%", "1.40", "350", "$0.0014", "lookup_order", "billing 2/2", "tech 0/1"} {
		if !strings.Contains(card, want) {
			t.Errorf("v1's card has no %q: %q", want, card)
		}
	}
	cmp := p.Text(".comparison")
	if !strings.Contains(cmp, "triage@v2 against triage@v1") || !strings.Contains(cmp, "Regressions (1)\npassword#1") || !strings.Contains(cmp, "Fixes (1)\ncrash#1") {
		t.Errorf("the comparison: %q", cmp)
	}
	verdicts := eval[[]string](p, `[...document.querySelectorAll('.cases-table tbody tr')].map(tr =>
		tr.dataset.case + ' ' + [...tr.querySelectorAll('.verdict')].map(v => v.textContent).join(' ') + ' ' +
		[...tr.querySelectorAll('.change-mark')].map(v => v.textContent).join(' '))`)
	want := []string{"refund#1 PASS PASS ", "crash#1 FAIL PASS fixed", "upsell#1 PASS PASS ", "password#1 PASS FAIL regressed", "invoice#1 PASS PASS "}
	if strings.Join(verdicts, "|") != strings.Join(want, "|") {
		t.Errorf("the cases:\n%v\nwant\n%v", verdicts, want)
	}
	crash := eval[string](p, `document.querySelector('tr[data-case="crash#1"] td').textContent`) // the count is hidden when narrow
	if !strings.Contains(crash, "equals_subset") || !strings.Contains(crash, "billing") || !strings.Contains(crash, "2/3 checks") {
		t.Errorf("v1's crash cell: %q", crash)
	}
}

// checkComparePage: v3 against v2 (of another evaluation): the figures
// and their changes, password fixed and invoice broken, first.
func checkComparePage(t *testing.T, p *page) {
	t.Helper()
	if got := p.Text(".run-head"); !strings.Contains(got, "triage@v3") || !strings.Contains(got, "against") || !strings.Contains(got, "triage@v2") {
		t.Errorf("the comparison's head: %q", got)
	}
	figs := eval[[]string](p, `[...document.querySelectorAll('.cmp-table tbody tr')].map(tr => tr.innerText.replace(/\s+/g, ' ').trim())`)
	if len(figs) != 8 || figs[0] != "Pass rate 80% 80% ±0" || figs[3] != "Tool calls 2 1 −1" || !strings.HasPrefix(figs[5], "Tokens 350 300 −50") {
		t.Errorf("the figures: %q", figs)
	}
	if cls := eval[string](p, `document.querySelectorAll('.cmp-table tbody tr')[5].querySelector('.delta').className`); !strings.Contains(cls, "better") {
		t.Errorf("fewer tokens are not shown better: %q", cls)
	}
	rows := eval[[]string](p, `[...document.querySelectorAll('.cases-table tbody tr')].map(tr => tr.dataset.case + ' ' + tr.className)`)
	if len(rows) != 5 || rows[0] != "invoice#1 row-regressed" || rows[1] != "password#1 row-fixed" {
		t.Errorf("the cases compared: %v", rows)
	}
	if got := p.Text(".comparison"); !strings.Contains(got, "Regressions (1)\ninvoice#1") || !strings.Contains(got, "Fixes (1)\npassword#1") {
		t.Errorf("the changes: %q", got)
	}
}

// TestViewerEvalsNavigate: with the keyboard, from the list (j, Enter)
// to an evaluation and back (Esc, the focus on its row); from a failed
// case to its run's trace and, by the run's parent link, back to the
// evaluation; another evaluation picked to compare with, the agent
// compared with changed, the two swapped.
func TestViewerEvalsNavigate(t *testing.T) {
	f, _ := newViewerFixture(t, nil)
	sides, v3, _ := storedEvals(t, f.st)
	p := openPage(t, f.http.URL, 1280, 900)
	p.Open("#/evals")
	p.WaitJS("the evaluations", `document.querySelectorAll('tr[data-eval-id]').length === 3`)
	p.Do("focus the first row", chromedp.Focus(chromedp.CSS(`tr[data-eval-id]`)))
	p.Key("j")
	p.Key("\r")
	p.WaitJS("v3's evaluation", fmt.Sprintf(`location.hash === '#/evals/%s' && document.querySelectorAll('.agent-card').length === 1`, v3.ID))
	if got := p.Text(".run-head"); !strings.Contains(got, "support-triage") || !strings.Contains(got, v3.ID) {
		t.Errorf("the head: %q", got)
	}
	p.Key("\x1b")
	p.WaitJS("back on its row", fmt.Sprintf(`location.hash === '#/evals' && document.activeElement.dataset.evalId === %q`, v3.ID))

	// A failed case's run, and back to its evaluation by its parent.
	p.Open("#/evals/" + sides.ID)
	p.WaitJS("the cases", `document.querySelectorAll('.cases-table tbody tr').length === 5`)
	runID := sides.Agents[0].Cases[1].RunID
	p.Click("v1's failed crash", `tr[data-case="crash#1"] a.verdict`)
	p.WaitJS("its run", fmt.Sprintf(`location.hash === '#/runs/%s' && (document.querySelector('.head-meta .badge') || {}).textContent === 'completed' &&
		document.querySelector('.wf-row.k-model') && !document.querySelector('.conn')`, runID))
	if got := p.Text(".answer"); !strings.Contains(got, `"queue": "billing"`) {
		t.Errorf("the crash run's answer: %q", got)
	}
	// (By script: the run's head is drawn anew when its audit records
	// come, and a click by position may find its link replaced.)
	p.Do("its parent", chromedp.Evaluate[chromedp.Void](`document.querySelector('.head-meta a[href="#/runs/`+sides.ID+`"]').click()`))
	p.WaitJS("the evaluation again", fmt.Sprintf(`location.hash === '#/evals/%s' && document.querySelectorAll('.agent-card').length === 2`, sides.ID))

	// Compare v3's evaluation with the first: v1 by default (no agent of
	// the same name), then v2, then swapped.
	p.Open("#/evals/" + v3.ID)
	p.WaitJS("the evaluations to compare with", fmt.Sprintf(`document.querySelector('#vs option[value=%q]')`, sides.ID))
	// (SetValue sends the input and change events a person's choice does.)
	p.Do("pick the first", chromedp.SetValue(chromedp.ID("vs"), sides.ID))
	p.Click("compare", ".compare-form button[type=submit]")
	p.WaitJS("v3 against v1", fmt.Sprintf(`location.hash === '#/evals/%s?vs=%s' && document.querySelector('.cmp-table') &&
		document.querySelector('#cmp-base').value === 'triage@v1'`, v3.ID, sides.ID))
	if got := p.Text(".comparison"); !strings.Contains(got, "Fixes (1)\ncrash#1") {
		t.Errorf("v3 against v1: %q", got)
	}
	p.Do("against v2", chromedp.SetValue(chromedp.ID("cmp-base"), "triage@v2"))
	p.Do("a helper", chromedp.Evaluate[chromedp.Void](`window.firstCase = () => (document.querySelector('.cases-table tbody tr') || {dataset: {}}).dataset.case`))
	p.WaitJS("v3 against v2", `location.hash.includes('base=triage%40v2') && firstCase() === 'invoice#1'`)
	p.Click("swap", "#cmp-swap")
	p.WaitJS("v2 against v3", fmt.Sprintf(`location.hash.startsWith('#/evals/%s?vs=%s') && document.querySelector('.cases-table tbody tr.row-regressed') &&
		firstCase() === 'password#1'`, sides.ID, v3.ID))
	p.Key("\x1b")
	p.WaitJS("the compared evaluation", fmt.Sprintf(`location.hash === '#/evals/%s' && document.querySelector('.agent-card')`, sides.ID))
}

// viewports are the windows the viewer is checked in: a desktop's and a
// phone's.
var viewports = []struct {
	name          string
	width, height int
}{{"wide", 1280, 900}, {"narrow", 390, 844}}

// rowOf selects the evaluations list's row of id.
func rowOf(id string) string { return fmt.Sprintf(`tr[data-eval-id=%q]`, id) }

// docs copies a screenshot to docs/ as name, with AGENTRY_VIEWER_DOCS=1.
func docs(t *testing.T, shot, name string) {
	t.Helper()
	if os.Getenv("AGENTRY_VIEWER_DOCS") == "1" {
		copyFile(t, shot, filepath.Join("..", "docs", name))
	}
}
