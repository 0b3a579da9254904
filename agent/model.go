package agent

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/agentry/agentry/internal/telemetry"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
)

// checkPriced refuses a cost budget on a model the pricing table does not
// know: such a budget would never fire.
func (a *Agent) checkPriced() []string {
	if a.limits.MaxCostUSD <= 0 || a.priceModel == "" {
		return nil
	}
	if _, ok := a.pricing.Lookup(a.priceModel); ok {
		return nil
	}
	return []string{fmt.Sprintf("limits.max_cost_usd: model %q has no price, so the budget could never be enforced; "+
		"price it with \"pricing\": {%q: {\"prompt\": USD_PER_MTOK, \"completion\": USD_PER_MTOK}} in the spec", a.priceModel, a.priceModel)}
}

// openModel opens the agent's model chain: the spec's model (or the one
// WithModel names, or the provider WithProvider gives), its fallbacks
// behind a router, each wrapped in the candidate middleware (its retries)
// and the whole in the model middleware.
func (a *Agent) openModel(o options) error {
	a.candidateMW = a.candidateMiddleware(o)
	if !a.spec.Mode.NeedsModel() && o.provider == nil && o.model == "" {
		return nil // plan and service agents work with tools and Go code
	}
	model := a.spec.ModelName
	if a.spec.Provider != "" && model != "" && !strings.HasPrefix(model, a.spec.Provider+":") {
		model = a.spec.Provider + ":" + model
	}
	fallbacks := a.spec.FallbackModels
	baseURL := a.spec.BaseURL
	if o.model != "" {
		// --model replaces the model and its fallbacks. One of the spec's
		// own fallbacks runs as the spec describes it (its provider and
		// base_url, its paths the spec file's); any other model keeps the
		// spec's base_url, and its relative paths are the caller's.
		model, fallbacks = o.model, nil
		if f, ok := fallbackNamed(a.spec, o.model); ok {
			model, baseURL = f.ModelName, f.BaseURL
			if f.Provider != "" && !strings.HasPrefix(model, f.Provider+":") {
				model = f.Provider + ":" + model
			}
		} else {
			o.baseDir = ""
		}
		if p := a.spec.Unlisted(model, baseURL); p != "" {
			return fmt.Errorf("model %s", p)
		}
	}
	a.modelName, a.modelAt = model, llm.Config{BaseURL: baseURL, Dir: o.baseDir}
	if o.provider != nil {
		a.providerName = o.provider.name
		if a.providerName == "" {
			a.providerName = "custom"
		}
		_, a.model = llm.ParseModel(model)
		a.priceModel = pricedAs(o.provider.p, a.model)
		a.closeProvider(o.provider.p)
		a.models = append(a.models, o.provider.p)
		a.provider = a.modelChain(o, a.candidateChain(o.provider.p, a.providerName, a.model))
		return nil
	}
	if model == "" {
		// A model may be given in code instead (WithProvider, WithModel),
		// so the spec alone does not need one.
		return fmt.Errorf("model_name is required for mode %s (or give the agent a model in code: agent.WithProvider or agent.WithModel)", a.spec.Mode)
	}
	first, pricedModel, err := a.candidate(o, model, baseURL)
	if err != nil {
		return fmt.Errorf("model_name: %v", err)
	}
	a.providerName, a.model, a.priceModel = first.Name, first.Model, pricedModel
	a.window = first.Caps.ContextWindow // a spec's context.window replaces it (New)
	sel := a.spec.ModelSelection
	if o.model != "" {
		sel = nil // a model given in place of the spec's replaces its choice too
	}
	if len(fallbacks) == 0 && sel == nil {
		a.provider = a.modelChain(o, first.Provider)
		return nil
	}
	cands := []llm.Candidate{first}
	for i, f := range fallbacks {
		name := f.ModelName
		if f.Provider != "" {
			name = f.Provider + ":" + f.ModelName
		}
		c, _, err := a.candidate(o, name, f.BaseURL)
		if err != nil {
			return fmt.Errorf("fallback_models[%d]: %v", i, err)
		}
		cands = append(cands, c)
	}
	if err := underCeiling(cands, sel); err != nil {
		return err
	}
	a.provider = a.modelChain(o, llm.NewRouter(cands, routerOptions(sel)))
	return nil
}

// underCeiling refuses a selection whose price ceiling leaves no model
// to call: every request would fail.
func underCeiling(cands []llm.Candidate, sel *spec.ModelSelection) error {
	if sel == nil || sel.MaxPromptPrice == 0 && sel.MaxCompletionPrice == 0 {
		return nil
	}
	var why []string
	for _, c := range cands {
		switch {
		case c.Unpriced:
			why = append(why, fmt.Sprintf("%s has no price", c.Model))
		case sel.MaxPromptPrice > 0 && c.Price.Prompt > sel.MaxPromptPrice:
			why = append(why, fmt.Sprintf("%s costs %g a million prompt tokens", c.Model, c.Price.Prompt))
		case sel.MaxCompletionPrice > 0 && c.Price.Completion > sel.MaxCompletionPrice:
			why = append(why, fmt.Sprintf("%s costs %g a million completion tokens", c.Model, c.Price.Completion))
		default:
			return nil
		}
	}
	return fmt.Errorf("model_selection: every model is above the price ceiling (%s)", strings.Join(why, "; "))
}

// fallbackNamed is the spec's fallback model named name, as the spec
// writes it (model_name, or provider:model_name).
func fallbackNamed(sp *spec.Spec, name string) (spec.ModelRef, bool) {
	for _, f := range sp.FallbackModels {
		if name == f.ModelName || f.Provider != "" && name == f.Provider+":"+f.ModelName {
			return f, true
		}
	}
	return spec.ModelRef{}, false
}

// candidate opens one model with its chain, so that a router falls over
// only once its retries are spent.
func (a *Agent) candidate(o options, name, baseURL string) (llm.Candidate, string, error) {
	m, err := llm.Open(name, llm.Config{BaseURL: baseURL, Dir: o.baseDir})
	if err != nil {
		return llm.Candidate{}, "", err
	}
	a.closeProvider(m.Provider)
	a.models = append(a.models, m.Provider)
	priced := pricedAs(m.Provider, m.ID)
	price, known := a.pricing.Lookup(priced)
	return llm.Candidate{Provider: a.candidateChain(m.Provider, m.ProviderName, m.ID), Name: m.ProviderName, Model: m.ID, Caps: m.Capabilities,
		Price: price, Unpriced: !known}, priced, nil
}

// closeProvider makes Close close p, when p holds something open (an
// io.Closer: a connection pool, a local model process).
func (a *Agent) closeProvider(p llm.Provider) {
	if c, ok := p.(io.Closer); ok {
		a.closers = append(a.closers, c.Close)
	}
}

// pricedAs is the model whose price applies to p: the one it says it
// answers as (llm.Named), else model.
func pricedAs(p llm.Provider, model string) string {
	if n, ok := p.(llm.Named); ok && n.ModelName() != "" {
		return n.ModelName()
	}
	return model
}

// candidateChain is what each model gets: its chat span and metrics ->
// retry -> timeout -> transport middleware -> panic recovery -> the
// provider.
func (a *Agent) candidateChain(p llm.Provider, provider, model string) llm.Provider {
	return a.observe(llm.Chain(p, a.candidateMW...), provider, model)
}

// candidateMiddleware is built once: a session with its own provider
// only applies it.
func (a *Agent) candidateMiddleware(o options) []llm.Middleware {
	policy, timeout := a.retryPolicy(), time.Duration(a.limits.ModelTimeoutMS)*time.Millisecond
	if len(o.transportMW) == 0 {
		return []llm.Middleware{llm.Guard(policy, timeout, true)} // the three below in one layer
	}
	mws := make([]llm.Middleware, 0, 3+len(o.transportMW))
	mws = append(mws, llm.Retry(policy), llm.Timeout(timeout))
	mws = append(mws, o.transportMW...)
	return append(mws, llm.Recover())
}

// modelChain wraps the agent's model (one candidate or a router) with the
// run log (which passes calls through unless the run is durable) and the
// user's provider middleware outside it.
func (a *Agent) modelChain(o options, p llm.Provider) llm.Provider {
	return journalModel(llm.Chain(p, o.providerMW...))
}

// sessionChain is modelChain for a session's own provider: without a
// store nothing is journaled, and without a tracer or a metrics reader
// nothing is observed: the session spends no wrapper on either.
func (a *Agent) sessionChain(p llm.Provider, durable bool) llm.Provider {
	p = llm.Chain(p, a.candidateMW...)
	if telemetry.Tracing(a.o.tracers) || a.metrics.genai.on(context.Background()) {
		p = a.observe(p, a.providerName, a.model)
	}
	p = llm.Chain(p, a.o.providerMW...)
	if durable {
		p = journalModel(p)
	}
	return p
}

// readier is a provider that can tell before any call that calls would
// fail for want of configuration (no API key): the built-in providers.
type readier interface{ Ready() error }

// Ready reports what keeps the agent's models, or its sub-agents', from
// being called: a provider without its API key. NewSession refuses to
// start a run then (ErrConfig), before anything is stored; a host calls
// it when it starts, to fail before its first request. New does not, so
// that a spec can be checked where no key is.
func (a *Agent) Ready() error {
	for _, r := range a.readiers {
		if err := r.Ready(); err != nil {
			return fmt.Errorf("%w: agent %s: %w", ErrConfig, a.spec.AgentName, err)
		}
	}
	for _, sub := range a.subs {
		if err := sub.Ready(); err != nil {
			return err
		}
	}
	return nil
}

// noteReadiers finds, once, what Ready asks: the models that can tell
// they lack a key, and the sub-agents (a run of an agent with neither
// asks nothing).
func (a *Agent) noteReadiers() {
	for _, p := range a.models {
		if r, ok := p.(readier); ok {
			a.readiers = append(a.readiers, r)
		}
	}
	for _, b := range a.tools.byName {
		if b.sub != nil {
			a.subs = append(a.subs, b.sub)
		}
	}
}

// routerOptions are the router's for the spec's model_selection.
func routerOptions(sel *spec.ModelSelection) llm.RouterOptions {
	if sel == nil {
		return llm.RouterOptions{}
	}
	o := llm.RouterOptions{MaxPromptPrice: sel.MaxPromptPrice, MaxCompletionPrice: sel.MaxCompletionPrice}
	switch sel.Strategy {
	case "cheapest":
		o.Strategy = llm.Cheapest
	case "fastest":
		o.Strategy = llm.Fastest
	}
	return o
}
