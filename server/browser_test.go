package server

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// The viewer's tests in a real Chromium (Debian's chromium, installed by
// scripts/test-deps.sh, which exports its path as AGENTRY_TEST_CHROMIUM),
// driven with chromedp. Without a Chromium they skip, unless
// AGENTRY_REQUIRE_SERVICES=1 (scripts/test.sh) makes them fail. Nothing
// waits a fixed time: each step waits for a condition of the page, under
// one generous deadline per test. Screenshots go to artifactsDir.

// browserDeadline bounds a whole browser test, on a loaded machine too.
const browserDeadline = 3 * time.Minute

// pollTimeout bounds one wait for a condition of the page.
const pollTimeout = 90 * time.Second

func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("AGENTRY_TEST_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("AGENTRY_REQUIRE_SERVICES") == "1" {
		t.Fatal("no Chromium (AGENTRY_TEST_CHROMIUM is empty and none is on PATH): run scripts/test-deps.sh install")
	}
	t.Skip("no Chromium: set AGENTRY_TEST_CHROMIUM, or run scripts/test-deps.sh install")
	return ""
}

// artifactsDir is where the browser tests save their screenshots:
// $AGENTRY_TEST_ARTIFACTS/viewer, or $TMPDIR/agentry-artifacts/viewer.
func artifactsDir(t *testing.T) string {
	t.Helper()
	base := os.Getenv("AGENTRY_TEST_ARTIFACTS")
	if base == "" {
		base = filepath.Join(os.TempDir(), "agentry-artifacts")
	}
	dir := filepath.Join(base, "viewer")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// page is one browser tab on the viewer of a test server.
type page struct {
	t    *testing.T
	ctx  context.Context
	base string

	mu       sync.Mutex
	problems []string // uncaught exceptions and refusals of the page's policy
}

// openPage starts a Chromium, its window width×height, on base; it is
// closed when the test ends.
func openPage(t *testing.T, base string, width, height int) *page {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromiumPath(t)), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(width, height), chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("lang", "en-US"), chromedp.Flag("hide-scrollbars", true))
	ctx, cancel := context.WithTimeout(context.Background(), browserDeadline)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tab, cancelTab := chromedp.NewContext(actx)
	p := &page{t: t, ctx: tab, base: base}
	if err := chromedp.Do(tab, chromedp.EmulateViewport(int64(width), int64(height))); err != nil {
		cancelTab()
		cancelAlloc()
		cancel()
		t.Fatalf("chromium: %v", err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for m, err := range chromedp.Console(tab) {
			if err != nil {
				return
			}
			if m.IsException() || strings.Contains(m.Text, "Content Security Policy") || strings.Contains(m.Text, "Content-Security-Policy") {
				p.mu.Lock()
				p.problems = append(p.problems, m.String())
				p.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		p.mu.Lock()
		for _, pr := range p.problems {
			t.Errorf("the page: %s", pr)
		}
		p.mu.Unlock()
		cancelTab()
		cancelAlloc()
		cancel()
		wg.Wait()
	})
	return p
}

// do runs actions, failing the test on an error.
func (p *page) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

// open navigates to the viewer's route (e.g. "#/runs/ID").
func (p *page) open(route string) {
	p.t.Helper()
	p.do("open "+route, chromedp.Navigate(p.base+"/"+route))
}

// click clicks the first element sel matches, once it is there: found
// and clicked in one turn of the page, so that a render between finding
// and clicking (which chromedp.Click would meet as a node gone) cannot
// come between them.
func (p *page) click(what, sel string) {
	p.t.Helper()
	p.waitJS(what, fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.click(); return true })()`, sel))
}

// waitJS waits until the expression is truthy.
func (p *page) waitJS(what, expr string) {
	p.t.Helper()
	if _, err := chromedp.Run(p.ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(pollTimeout))); err != nil {
		p.t.Fatalf("waiting for %s (%s): %v\n%s", what, expr, err, p.text("main"))
	}
}

// eval answers the value of a JavaScript expression.
func eval[T any](p *page, expr string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		p.t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// text is the text of the first element sel matches ("" if none).
func (p *page) text(sel string) string {
	v, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {}).innerText || ""`, sel)))
	return v
}

// key presses keys on whatever has the focus.
func (p *page) key(keys string) {
	p.t.Helper()
	p.do("press "+keys, chromedp.KeyEvent(keys))
}

// screenshot saves the whole page as name.png in the artifacts folder,
// and answers the file's path.
func (p *page) screenshot(name string) string {
	p.t.Helper()
	p.do("scroll to the top", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	buf, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(artifactsDir(p.t), name+".png")
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("screenshot %s", path)
	return path
}

// noOverflow checks that nothing is wider than the window.
func (p *page) noOverflow(what string, width int) {
	p.t.Helper()
	if w := eval[int](p, `document.documentElement.scrollWidth`); w > width {
		wide := eval[string](p, fmt.Sprintf(`[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > %d + 1)
			.slice(0, 5).map(e => e.tagName + '.' + e.className).join(', ')`, width))
		p.t.Errorf("%s: the page is %d px wide in a %d px window (%s)", what, w, width, wide)
	}
}

// colorScheme makes the page prefer scheme ("light" or "dark").
func (p *page) colorScheme(scheme string) {
	p.t.Helper()
	_, err := chromedp.Call(p.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
	if err != nil {
		p.t.Fatalf("prefers-color-scheme %s: %v", scheme, err)
	}
}

// rowSel selects the runs list's row of run id.
func rowSel(id string) string { return fmt.Sprintf(`tr[data-run-id=%q]`, id) }

// startRun starts a run of agent over the API and answers its id.
func startRun(t *testing.T, f *fixture, key, body string) string {
	t.Helper()
	code, res := f.do(t, "POST", "/v1/runs", key, body)
	if code != 201 {
		t.Fatalf("start: %d %v", code, res)
	}
	return res["run_id"].(string)
}
