package prompt

import (
	"errors"
	"regexp"
	"slices"

	"github.com/osteele/liquid"
	"github.com/osteele/liquid/render"
)

// liquidEngine renders Liquid templates: the standard tags and filters,
// but for the tags that read files (include, and render where it
// exists), which a template from a store must not reach. Undefined
// variables render empty, as Liquid's do; a strict render asks for them
// by name first (liquidVars).
var liquidEngine = func() *liquid.Engine {
	e := liquid.NewEngine()
	refuse := func(render.Context) (string, error) {
		return "", errors.New("a prompt template reads no file: include and render are not allowed")
	}
	e.RegisterTag("include", refuse)
	e.RegisterTag("render", refuse)
	return e
}()

// liquidOutput finds the variables a Liquid template outputs or tests
// at its top level ({{ name }}, {{ name.field | filter }}, {% if name %},
// {% unless name %}, {% for x in name %}): what a render needs from
// params. A name a template assigns or loops over itself ({% assign %},
// {% capture %}, a for's variable) is its own, not a parameter; what
// the scan cannot see is declared in required_vars.
var (
	liquidOutput = regexp.MustCompile(`\{\{-?\s*([A-Za-z_][A-Za-z0-9_]*)`)
	liquidTest   = regexp.MustCompile(`\{%-?\s*(?:if|elsif|unless|case)\s+([A-Za-z_][A-Za-z0-9_]*)`)
	liquidFor    = regexp.MustCompile(`\{%-?\s*for\s+([A-Za-z_][A-Za-z0-9_]*)\s+in\s+([A-Za-z_][A-Za-z0-9_]*)`)
	liquidOwn    = regexp.MustCompile(`\{%-?\s*(?:assign|capture|increment|decrement)\s+([A-Za-z_][A-Za-z0-9_]*)`)
)

// liquidVars returns the parameters a Liquid text uses, each once, in
// order, and those it only tests (an absent one answers false); an
// error when the text does not parse.
func liquidVars(text string, add func(name string, cond bool)) error {
	if _, err := liquidEngine.ParseString(text); err != nil {
		return err
	}
	own := map[string]bool{"forloop": true, "true": true, "false": true, "nil": true, "empty": true, "blank": true}
	for _, m := range liquidOwn.FindAllStringSubmatch(text, -1) {
		own[m[1]] = true
	}
	for _, m := range liquidFor.FindAllStringSubmatch(text, -1) {
		own[m[1]] = true
	}
	type at struct {
		pos  int
		name string
		cond bool
	}
	var found []at
	for _, m := range liquidOutput.FindAllStringSubmatchIndex(text, -1) {
		found = append(found, at{m[2], text[m[2]:m[3]], false})
	}
	for _, m := range liquidTest.FindAllStringSubmatchIndex(text, -1) {
		found = append(found, at{m[2], text[m[2]:m[3]], true})
	}
	for _, m := range liquidFor.FindAllStringSubmatchIndex(text, -1) {
		found = append(found, at{m[4], text[m[4]:m[5]], false})
	}
	slices.SortFunc(found, func(a, b at) int { return a.pos - b.pos })
	for _, f := range found {
		if !own[f.name] {
			add(f.name, f.cond)
		}
	}
	return nil
}

// renderLiquid renders a Liquid text with params.
func renderLiquid(text string, params map[string]any) (string, error) {
	out, err := liquidEngine.ParseAndRenderString(text, params)
	if err != nil {
		return "", err
	}
	return out, nil
}
