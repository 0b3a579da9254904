package prompt

import (
	"github.com/mailgun/raymond/v2"
	"github.com/mailgun/raymond/v2/ast"
	"github.com/mailgun/raymond/v2/parser"
)

// handlebarsVars adds the variables a Handlebars text reads from its
// top-level context: the paths of its mustaches and the arguments of its
// helpers. Inside a block that changes the context ({{#each}}, {{#with}},
// a section) paths are the block's, not the input's; {{#if}} and
// {{#unless}} keep it. cond tells a variable read only as the condition
// of an {{#if}} or {{#unless}}, which an absent value answers (false).
func handlebarsVars(text string, add func(name string, cond bool)) error {
	prog, err := parser.Parse(text)
	if err != nil {
		return err
	}
	hbProgram(prog, add)
	return nil
}

func hbProgram(p *ast.Program, add func(string, bool)) {
	if p == nil {
		return
	}
	for _, n := range p.Body {
		hbNode(n, add, false)
	}
}

func hbNode(n ast.Node, add func(string, bool), cond bool) {
	switch n := n.(type) {
	case *ast.MustacheStatement:
		hbExpr(n.Expression, add, false)
	case *ast.BlockStatement:
		p, _ := n.Expression.Path.(*ast.PathExpression)
		conditional := p != nil && len(n.Expression.Params) > 0 && (p.Original == "if" || p.Original == "unless")
		hbExpr(n.Expression, add, conditional)
		if conditional {
			hbProgram(n.Program, add)
		}
		hbProgram(n.Inverse, add)
	case *ast.Expression:
		hbExpr(n, add, cond)
	case *ast.SubExpression:
		hbExpr(n.Expression, add, cond)
	case *ast.PathExpression:
		if !n.Data && n.Depth == 0 && len(n.Parts) > 0 && n.Parts[0] != "this" {
			add(n.Parts[0], cond)
		}
	}
}

// hbExpr: a plain path is a variable; a helper call reads its arguments
// (as conditions, when the helper is if or unless).
func hbExpr(e *ast.Expression, add func(string, bool), cond bool) {
	if e == nil {
		return
	}
	if len(e.Params) == 0 && e.Hash == nil {
		hbNode(e.Path, add, false)
		return
	}
	for _, p := range e.Params {
		hbNode(p, add, cond)
	}
	if e.Hash != nil {
		for _, pair := range e.Hash.Pairs {
			hbNode(pair.Val, add, false)
		}
	}
}

// renderHandlebars renders text with fill, unescaped: prompts are not
// HTML.
func renderHandlebars(text string, fill map[string]any) (string, error) {
	return raymond.Render(text, safe(fill))
}

// safe marks the strings of v as not to be escaped.
func safe(v any) any {
	switch x := v.(type) {
	case string:
		return raymond.SafeString(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = safe(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = safe(e)
		}
		return out
	}
	return v
}
