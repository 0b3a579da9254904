// Package browsertest drives a real Chromium for the viewer's tests
// (Debian's chromium, installed by scripts/test-deps.sh, which exports
// its path as AGENTRY_TEST_CHROMIUM), with chromedp. Without a Chromium a
// test skips, unless AGENTRY_REQUIRE_SERVICES=1 (scripts/test.sh) makes
// it fail. Nothing waits a fixed time: each step waits for a condition
// of the page, under one generous deadline per test. Screenshots go to
// ArtifactsDir.
package browsertest

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

// deadline bounds a whole browser test, on a loaded machine too.
const deadline = 3 * time.Minute

// pollTimeout bounds one wait for a condition of the page.
const pollTimeout = 90 * time.Second

// chromiumPath is the Chromium to run; the test skips (or fails, when
// services are required) without one.
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

// ArtifactsDir is where the browser tests save their screenshots:
// $AGENTRY_TEST_ARTIFACTS/viewer, or $TMPDIR/agentry-artifacts/viewer.
func ArtifactsDir(t *testing.T) string {
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

// Page is one browser tab on a viewer.
type Page struct {
	t    *testing.T
	ctx  context.Context
	base string

	mu       sync.Mutex
	problems []string // uncaught exceptions and refusals of the page's policy
}

// Open starts a Chromium, its window width×height, on base (the
// viewer's URL); it is closed when the test ends, which fails if the
// page threw or broke its content security policy.
func Open(t *testing.T, base string, width, height int) *Page {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromiumPath(t)), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(width, height), chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("lang", "en-US"), chromedp.Flag("hide-scrollbars", true))
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tab, cancelTab := chromedp.NewContext(actx)
	p := &Page{t: t, ctx: tab, base: base}
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

// Do runs actions, failing the test on an error.
func (p *Page) Do(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

// Open navigates to the viewer's route (e.g. "#/runs/ID").
func (p *Page) Open(route string) {
	p.t.Helper()
	p.Do("open "+route, chromedp.Navigate(p.base+"/"+route))
}

// Click clicks the first element sel matches, once it is there: found
// and clicked in one turn of the page, so that a render between finding
// and clicking (which chromedp.Click would meet as a node gone) cannot
// come between them.
func (p *Page) Click(what, sel string) {
	p.t.Helper()
	p.WaitJS(what, fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.click(); return true })()`, sel))
}

// WaitJS waits until the expression is truthy.
func (p *Page) WaitJS(what, expr string) {
	p.t.Helper()
	if _, err := chromedp.Run(p.ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(pollTimeout))); err != nil {
		p.t.Fatalf("waiting for %s (%s): %v\n%s", what, expr, err, p.Text("main"))
	}
}

// Eval answers the value of a JavaScript expression on p.
func Eval[T any](p *Page, expr string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		p.t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// Text is the text of the first element sel matches ("" if none).
func (p *Page) Text(sel string) string {
	v, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {}).innerText || ""`, sel)))
	return v
}

// Key presses keys on whatever has the focus.
func (p *Page) Key(keys string) {
	p.t.Helper()
	p.Do("press "+keys, chromedp.KeyEvent(keys))
}

// Screenshot saves the whole page as name.png in the artifacts folder,
// and answers the file's path.
func (p *Page) Screenshot(name string) string {
	p.t.Helper()
	p.Do("scroll to the top", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	buf, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(ArtifactsDir(p.t), name+".png")
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("screenshot %s", path)
	return path
}

// NoOverflow checks that nothing is wider than the window.
func (p *Page) NoOverflow(what string, width int) {
	p.t.Helper()
	if w := Eval[int](p, `document.documentElement.scrollWidth`); w > width {
		wide := Eval[string](p, fmt.Sprintf(`[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > %d + 1)
			.slice(0, 5).map(e => e.tagName + '.' + e.className).join(', ')`, width))
		p.t.Errorf("%s: the page is %d px wide in a %d px window (%s)", what, w, width, wide)
	}
}

// ColorScheme makes the page prefer scheme ("light" or "dark").
func (p *Page) ColorScheme(scheme string) {
	p.t.Helper()
	_, err := chromedp.Call(p.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
	if err != nil {
		p.t.Fatalf("prefers-color-scheme %s: %v", scheme, err)
	}
}
