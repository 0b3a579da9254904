// Package liquid adds the Liquid engine to package prompt: import it
// for its effect, as a database/sql driver is,
//
//	import _ "github.com/agentry/agentry/prompt/liquid"
//
// and a template whose engine is "liquid" renders with
// github.com/osteele/liquid: {{ var | filter }}, {% if %}, {% for %}
// and Liquid's standard filters. No tag reads a file: include and render
// are refused, so a template from a store cannot pull a host file into a
// prompt. The agentry binary links it.
package liquid

import (
	"errors"
	"regexp"
	"slices"

	"github.com/osteele/liquid"
	"github.com/osteele/liquid/render"

	"github.com/agentry/agentry/prompt"
)

func init() {
	prompt.RegisterEngine(prompt.Liquid, prompt.EngineDriver{Vars: vars, Render: renderText})
}

// engine renders Liquid templates: the standard tags and filters,
// but for the tags that read files (include, and render where it
// exists), which a template from a store must not reach. Undefined
// variables render empty, as Liquid's do; a strict render asks for them
// by name first (vars).
var engine = func() *liquid.Engine {
	e := liquid.NewEngine()
	refuse := func(render.Context) (string, error) {
		return "", errors.New("a prompt template reads no file: include and render are not allowed")
	}
	e.RegisterTag("include", refuse)
	e.RegisterTag("render", refuse)
	return e
}()

// The scan of a template's variables: those it outputs, tests or loops
// over at its top level ({{ name }}, {{ name.field | filter }}, {% if name %},
// {% unless name %}, {% for x in name %}): what a render needs from
// params. A name a template assigns or loops over itself ({% assign %},
// {% capture %}, a for's variable) is its own, not a parameter; what
// the scan cannot see is declared in required_vars.
var (
	output   = regexp.MustCompile(`\{\{-?\s*([A-Za-z_][A-Za-z0-9_]*)`)
	tested   = regexp.MustCompile(`\{%-?\s*(?:if|elsif|unless|case)\s+([A-Za-z_][A-Za-z0-9_]*)`)
	loop     = regexp.MustCompile(`\{%-?\s*for\s+([A-Za-z_][A-Za-z0-9_]*)\s+in\s+([A-Za-z_][A-Za-z0-9_]*)`)
	assigned = regexp.MustCompile(`\{%-?\s*(?:assign|capture|increment|decrement)\s+([A-Za-z_][A-Za-z0-9_]*)`)
)

// vars calls add with each parameter a Liquid text uses, in order, and
// whether it only tests it (an absent one answers false); an error when
// the text does not parse.
func vars(text string, add func(name string, cond bool)) error {
	if _, err := engine.ParseString(text); err != nil {
		return err
	}
	own := map[string]bool{"forloop": true, "true": true, "false": true, "nil": true, "empty": true, "blank": true}
	for _, m := range assigned.FindAllStringSubmatch(text, -1) {
		own[m[1]] = true
	}
	for _, m := range loop.FindAllStringSubmatch(text, -1) {
		own[m[1]] = true
	}
	type at struct {
		pos  int
		name string
		cond bool
	}
	var found []at
	for _, m := range output.FindAllStringSubmatchIndex(text, -1) {
		found = append(found, at{m[2], text[m[2]:m[3]], false})
	}
	for _, m := range tested.FindAllStringSubmatchIndex(text, -1) {
		found = append(found, at{m[2], text[m[2]:m[3]], true})
	}
	for _, m := range loop.FindAllStringSubmatchIndex(text, -1) {
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

// renderText renders a Liquid text with params.
func renderText(text string, params map[string]any) (string, error) {
	out, err := engine.ParseAndRenderString(text, params)
	if err != nil {
		return "", err
	}
	return out, nil
}
