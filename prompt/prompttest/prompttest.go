// Package prompttest is the conformance suite of writable prompt stores.
package prompttest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/agentry/agentry/prompt"
)

// Run runs the suite; open returns a new, empty store for one test.
func Run(t *testing.T, open func(t *testing.T) prompt.Store) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s prompt.Store)
	}{
		{"Versions", testVersions},
		{"List", testList},
		{"Refuses", testRefuses},
		{"ConcurrentPuts", testConcurrentPuts},
		{"StringVersions", testStringVersions},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

// A template put twice gives versions 1 and 2; version 1 is unchanged,
// the latest is 2.
func testVersions(t *testing.T, s prompt.Store) {
	ctx := context.Background()
	v1, err := s.Put(ctx, prompt.Template{ID: "greet", Text: "Hello ${name}.", RequiredVars: []string{"name"}, CreatedBy: "ada",
		Metadata: map[string]any{"tags": []any{"demo"}}})
	if err != nil || v1.Version != "1" || v1.CreatedAt.IsZero() {
		t.Fatalf("first Put = %+v, %v", v1, err)
	}
	v2, err := s.Put(ctx, prompt.Template{ID: "greet", Engine: prompt.Go, Text: "Hi {{.name}}!", RequiredVars: []string{"name"}})
	if err != nil || v2.Version != "2" {
		t.Fatalf("second Put = %+v, %v", v2, err)
	}
	got, err := s.Get(ctx, "greet", "1")
	if err != nil || got.Text != "Hello ${name}." || got.Engine != "" || got.CreatedBy != "ada" || !got.CreatedAt.Equal(v1.CreatedAt) || got.Tags()[0] != "demo" {
		t.Errorf("version 1 after a second put: %+v, %v", got, err)
	}
	if r, err := got.Render(map[string]any{"name": "Ada"}, true); err != nil || r.Text != "Hello Ada." {
		t.Errorf("render v1 = %+v, %v", r, err)
	}
	latest, err := s.Get(ctx, "greet", "")
	if err != nil || latest.Version != "2" || latest.Text != "Hi {{.name}}!" {
		t.Errorf("latest = %+v, %v", latest, err)
	}
	if _, err := s.Get(ctx, "greet", "3"); !errors.Is(err, prompt.ErrNotFound) {
		t.Errorf("Get of a version not put: %v", err)
	}
	if _, err := s.Get(ctx, "nope", ""); !errors.Is(err, prompt.ErrNotFound) {
		t.Errorf("Get of a template never put: %v", err)
	}
}

func testList(t *testing.T, s prompt.Store) {
	ctx := context.Background()
	for _, tpl := range []prompt.Template{
		{ID: "a", Text: "a1", Metadata: map[string]any{"tags": []any{"x"}}},
		{ID: "a", Text: "a2"},
		{ID: "b", Text: "b1", Metadata: map[string]any{"tags": []any{"x", "y"}}},
	} {
		if _, err := s.Put(ctx, tpl); err != nil {
			t.Fatal(err)
		}
	}
	refs := func(ts []prompt.Template) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.Ref())
		}
		return out
	}
	for _, tc := range []struct {
		f    prompt.Filter
		want []string
	}{
		{prompt.Filter{}, []string{"a@2", "b@1"}},
		{prompt.Filter{AllVersions: true}, []string{"a@1", "a@2", "b@1"}},
		{prompt.Filter{ID: "a", AllVersions: true}, []string{"a@1", "a@2"}},
		{prompt.Filter{Tag: "x"}, []string{"b@1"}},
		{prompt.Filter{Tag: "x", AllVersions: true}, []string{"a@1", "b@1"}},
	} {
		got, err := s.List(ctx, tc.f)
		if err != nil || !slices.Equal(refs(got), tc.want) {
			t.Errorf("List(%+v) = %v, %v; want %v", tc.f, refs(got), err, tc.want)
		}
	}
}

func testRefuses(t *testing.T, s prompt.Store) {
	ctx := context.Background()
	for _, tpl := range []prompt.Template{
		{ID: "", Text: "x"},
		{ID: "a", Text: "Hi ${name}", RequiredVars: []string{"city"}},
		{ID: "a", Engine: prompt.Go, Text: "{{.x"},
	} {
		if _, err := s.Put(ctx, tpl); !errors.Is(err, prompt.ErrInvalid) {
			t.Errorf("Put(%+v) = %v, want ErrInvalid", tpl, err)
		}
	}
	if got, _ := s.List(ctx, prompt.Filter{AllVersions: true}); len(got) != 0 {
		t.Errorf("refused templates were stored: %+v", got)
	}
}

func testConcurrentPuts(t *testing.T, s prompt.Store) {
	ctx := context.Background()
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			if _, err := s.Put(ctx, prompt.Template{ID: "busy", Text: fmt.Sprintf("text %d", i)}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	all, err := s.List(ctx, prompt.Filter{ID: "busy", AllVersions: true})
	if err != nil || len(all) != n {
		t.Fatalf("%d versions after %d puts (%v)", len(all), n, err)
	}
	for i, tpl := range all {
		if tpl.Version != strconv.Itoa(i+1) {
			t.Errorf("versions %v are not 1..%d", all, n)
		}
	}
}

// Versions are strings: a version given is kept as written and found by
// it, never put twice; the next counted one follows the form of the
// greatest; the latest is the greatest as a version (v10 after v9), not
// as text.
func testStringVersions(t *testing.T, s prompt.Store) {
	ctx := context.Background()
	put := func(version, text string) (prompt.Template, error) {
		return s.Put(ctx, prompt.Template{ID: "greet", Version: version, Text: text})
	}
	for _, tc := range []struct{ version, text, want string }{
		{"v1", "one", "v1"},
		{"v9", "nine", "v9"},
		{"", "ten", "v10"},
		{"draft", "a draft", "draft"},
	} {
		got, err := put(tc.version, tc.text)
		if err != nil || got.Version != tc.want {
			t.Fatalf("Put(%q) = %q, %v; want version %q", tc.version, got.Version, err, tc.want)
		}
	}
	if _, err := put("v9", "nine again"); !errors.Is(err, prompt.ErrInvalid) || !strings.Contains(err.Error(), "greet@v9 exists") {
		t.Errorf("a version put twice: %v", err)
	}
	if _, err := put("../v11", "x"); !errors.Is(err, prompt.ErrInvalid) {
		t.Errorf("a version that is no file name: %v", err)
	}
	for _, tc := range []struct{ version, text string }{{"v1", "one"}, {"", "ten"}, {"9", "nine"}, {"draft", "a draft"}} {
		got, err := s.Get(ctx, "greet", tc.version)
		if err != nil || got.Text != tc.text {
			t.Errorf("Get(greet, %q) = %q, %v; want %q", tc.version, got.Text, err, tc.text)
		}
	}
	all, err := s.List(ctx, prompt.Filter{ID: "greet", AllVersions: true})
	var vs []string
	for _, tpl := range all {
		vs = append(vs, tpl.Version)
	}
	if err != nil || !slices.Equal(vs, []string{"draft", "v1", "v9", "v10"}) {
		t.Errorf("List = %v, %v; want draft v1 v9 v10", vs, err)
	}
	if latest, _ := s.List(ctx, prompt.Filter{ID: "greet"}); len(latest) != 1 || latest[0].Version != "v10" {
		t.Errorf("List of the latest = %+v", latest)
	}
	if _, err := s.Put(ctx, prompt.Template{ID: "sem", Version: "1.2.0", Text: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, prompt.Template{ID: "sem", Text: "y"}); !errors.Is(err, prompt.ErrInvalid) || !strings.Contains(err.Error(), "give the version") {
		t.Errorf("the next of a semantic version: %v", err)
	}
}
