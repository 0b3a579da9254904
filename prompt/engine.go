package prompt

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"text/template"
	"text/template/parse"

	"github.com/cbroglie/mustache"
)

// Engine renders a template's text.
type Engine string

// The engines.
const (
	FString  Engine = "fstring"  // ${var}, as specs' texts
	Go       Engine = "go"       // text/template: {{.var}}
	Mustache Engine = "mustache" // {{var}}, not HTML-escaped
	// Handlebars is mustache with helpers ({{#if}}, {{#each}}, {{lookup}}),
	// not HTML-escaped.
	Handlebars Engine = "handlebars"
	// Liquid is {{ var | filter }} and {% if %}/{% for %} tags, with
	// Liquid's standard filters; no tag reads a file. The variables it
	// outputs, tests or loops over at its top level are found; one it
	// reaches otherwise is declared in RequiredVars. A program links it
	// by importing github.com/agentry/agentry/prompt/liquid.
	Liquid Engine = "liquid"
)

// An EngineDriver is an engine a package adds (RegisterEngine): Vars
// calls add with each variable a text uses, in order, and whether it
// only tests it (an absent one answers false), or says why the text does
// not parse; Render renders a text with params.
type EngineDriver struct {
	Vars   func(text string, add func(name string, cond bool)) error
	Render func(text string, params map[string]any) (string, error)
}

var drivers sync.Map // Engine -> EngineDriver

// RegisterEngine makes an engine available to templates, as a
// database/sql driver is: its package calls it from init (the Liquid
// engine's is prompt/liquid). Registering one twice, or a driver
// without Vars or Render, panics: both are programming errors.
func RegisterEngine(e Engine, d EngineDriver) {
	if d.Vars == nil || d.Render == nil {
		panic("prompt: RegisterEngine of an incomplete driver for " + string(e))
	}
	if _, dup := drivers.LoadOrStore(e, d); dup {
		panic("prompt: RegisterEngine twice for " + string(e))
	}
}

// linked is the driver of an engine a package adds, or an error naming
// the package to import.
func linked(e Engine) (EngineDriver, error) {
	if d, ok := drivers.Load(e); ok {
		return d.(EngineDriver), nil
	}
	return EngineDriver{}, fmt.Errorf("engine %q is not linked into this program: import _ \"github.com/agentry/agentry/prompt/%s\"", e, e)
}

func (e Engine) orDefault() Engine {
	if e == "" {
		return FString
	}
	return e
}

// Rendered is a template rendered: its text, an estimate of its tokens
// (a quarter of its bytes, rounded up: the usual ratio for English with
// the common tokenizers), and the few-shot examples of its metadata.
type Rendered struct {
	Text     string    `json:"text"`
	Tokens   int       `json:"tokens"`
	Examples []Example `json:"examples,omitempty"`
}

// Vars are the variables the template's text uses, in the order they
// first appear.
func (t *Template) Vars() ([]string, error) { return vars(t.Engine, t.Text) }

// vars returns the variables text uses, parsing it with the engine: each
// once, in order.
func vars(e Engine, text string) ([]string, error) {
	out, _, err := varsOf(e, text)
	return out, err
}

// varsOf returns the variables text uses, and those it reads only as a
// condition (a handlebars {{#if}}), which an absent value answers.
func varsOf(e Engine, text string) ([]string, map[string]bool, error) {
	var out []string
	condOnly := map[string]bool{}
	add := func(name string) {
		if name, _, _ = strings.Cut(name, "."); name != "" && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	switch e.orDefault() {
	case FString:
		if i := strings.Index(strings.ReplaceAll(text, "$${", ""), "${"); i >= 0 && !strings.Contains(text[i:], "}") {
			return nil, nil, fmt.Errorf("unclosed ${")
		}
		for _, v := range Vars(text) {
			add(v)
		}
	case Go:
		t, err := template.New("t").Option("missingkey=error").Parse(text)
		if err != nil {
			return nil, nil, err
		}
		walk(t.Tree.Root, func(f *parse.FieldNode) { add(f.Ident[0]) })
	case Mustache:
		t, err := mustache.ParseString(text)
		if err != nil {
			return nil, nil, err
		}
		for _, tag := range t.Tags() {
			if tag.Type() != mustache.Partial {
				add(tag.Name())
			}
		}
	case Handlebars, Liquid:
		// A variable only tested ({{#if}}, {% if %}) is answered by its
		// absence; one also output is needed.
		plain := map[string]bool{}
		track := func(name string, cond bool) {
			add(name)
			name, _, _ = strings.Cut(name, ".")
			if cond && !plain[name] {
				condOnly[name] = true
			} else {
				plain[name], condOnly[name] = true, false
			}
		}
		find := handlebarsVars
		if e == Liquid {
			d, err := linked(e)
			if err != nil {
				return nil, nil, err
			}
			find = d.Vars
		}
		if err := find(text, track); err != nil {
			return nil, nil, err
		}
	default:
		return nil, nil, fmt.Errorf("engine %q: want fstring, go, mustache, handlebars or liquid", e)
	}
	return out, condOnly, nil
}

// walk calls fn with the field nodes ({{.name}}) of a text/template tree
// outside range and with blocks, which change what "." is.
func walk(n parse.Node, fn func(*parse.FieldNode)) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n != nil {
			for _, c := range n.Nodes {
				walk(c, fn)
			}
		}
	case *parse.ActionNode:
		walk(n.Pipe, fn)
	case *parse.PipeNode:
		if n != nil {
			for _, c := range n.Cmds {
				walk(c, fn)
			}
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			walk(a, fn)
		}
	case *parse.FieldNode:
		fn(n)
	case *parse.IfNode:
		walk(n.Pipe, fn)
		walk(n.List, fn)
		walk(n.ElseList, fn)
	case *parse.RangeNode:
		walk(n.Pipe, fn)
	case *parse.WithNode:
		walk(n.Pipe, fn)
	}
}

// rangedFields adds to out the variables a text/template ranges over
// ({{range .items}}): rendered leniently, a missing one is nil (nothing
// to range over), not "" (which range refuses).
func rangedFields(n parse.Node, out map[string]bool) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n != nil {
			for _, c := range n.Nodes {
				rangedFields(c, out)
			}
		}
	case *parse.IfNode:
		rangedFields(n.List, out)
		rangedFields(n.ElseList, out)
	case *parse.WithNode:
		rangedFields(n.ElseList, out)
	case *parse.RangeNode:
		walk(n.Pipe, func(f *parse.FieldNode) { out[f.Ident[0]] = true })
		rangedFields(n.ElseList, out)
	}
}

// Validate returns what is wrong with a template: no id or text, an
// unknown engine, text the engine cannot parse, a required variable the
// text does not use, bad few-shot examples. None: nil.
func Validate(t Template) []string {
	var probs []string
	if err := checkID(t.ID); err != nil {
		probs = append(probs, strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": "))
	}
	if t.Version != "" {
		if err := checkVersion(t.Version); err != nil {
			probs = append(probs, strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": "))
		}
	}
	if strings.TrimSpace(t.Text) == "" {
		probs = append(probs, "text is empty")
	}
	used, err := vars(t.Engine, t.Text)
	if err != nil {
		probs = append(probs, fmt.Sprintf("text (%s): %v", t.Engine.orDefault(), err))
	}
	for i, v := range t.RequiredVars {
		if err == nil && !slices.Contains(used, v) {
			probs = append(probs, fmt.Sprintf("required_vars[%d] %q: the text does not use it", i, v))
		}
	}
	if _, err := t.Examples(); err != nil {
		probs = append(probs, err.Error())
	}
	return probs
}

// MissingError names the variables a render lacks.
type MissingError struct {
	Template string
	Vars     []string
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("prompt %s: missing variables %s", e.Template, strings.Join(e.Vars, ", "))
}

// Render renders t with params. With strict, a variable the text uses
// (or a required one) that params lacks is a *MissingError naming them
// all; without, required ones still are, and others render empty.
func (t *Template) Render(params map[string]any, strict bool) (Rendered, error) {
	used, condOnly, err := varsOf(t.Engine, t.Text)
	if err != nil {
		return Rendered{}, fmt.Errorf("%w: %s: %v", ErrInvalid, t.Ref(), err)
	}
	var missing []string
	for _, v := range t.RequiredVars {
		if _, ok := params[v]; !ok {
			missing = append(missing, v)
		}
	}
	fill := maps.Clone(params)
	if fill == nil {
		fill = map[string]any{}
	}
	ranged := map[string]bool{}
	if t.Engine == Go {
		if tmpl, err := template.New("t").Parse(t.Text); err == nil {
			rangedFields(tmpl.Tree.Root, ranged)
		}
	}
	for _, v := range used {
		if _, ok := params[v]; !ok {
			if strict && !slices.Contains(missing, v) && !condOnly[v] {
				missing = append(missing, v)
			}
			fill[v] = ""
			if ranged[v] || t.Engine == Liquid { // Liquid: "" is true, nil renders empty and tests false
				fill[v] = nil
			}
		}
	}
	if len(missing) > 0 {
		return Rendered{}, &MissingError{Template: t.Ref(), Vars: missing}
	}
	var text string
	switch t.Engine.orDefault() {
	case FString:
		text, err = Render(t.Ref(), t.Text, fill)
	case Go:
		var tmpl *template.Template
		if tmpl, err = template.New(t.Ref()).Option("missingkey=zero").Parse(t.Text); err == nil {
			var b strings.Builder
			err = tmpl.Execute(&b, fill)
			text = b.String()
		}
	case Mustache:
		var tmpl *mustache.Template
		if tmpl, err = mustache.ParseString(t.Text); err == nil {
			tmpl.Escape(func(s string) string { return s }) // prompts are not HTML
			text, err = tmpl.Render(fill)
		}
	case Handlebars:
		text, err = renderHandlebars(t.Text, fill)
	case Liquid:
		var d EngineDriver
		if d, err = linked(Liquid); err == nil {
			text, err = d.Render(t.Text, fill)
		}
	}
	if err != nil {
		return Rendered{}, fmt.Errorf("prompt %s: %w", t.Ref(), err)
	}
	ex, err := t.Examples()
	if err != nil {
		return Rendered{}, fmt.Errorf("prompt %s: %w", t.Ref(), err)
	}
	return Rendered{Text: text, Tokens: (len(text) + 3) / 4, Examples: ex}, nil
}
