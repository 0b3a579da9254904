package llm

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
)

// Capabilities say what a model can do.
type Capabilities struct {
	// Tools says the model calls tools; StructuredOutput that it answers
	// to a JSON schema; Streaming that it streams its reply.
	Tools            bool
	StructuredOutput bool
	Streaming        bool
	// Vision says the model takes images in its input.
	Vision bool
	// ContextWindow is the most prompt and completion tokens the model
	// takes; 0 means unknown (not checked).
	ContextWindow int
	// Unknown says the provider does not know the model (a local
	// server's, a gateway's, a deployment's own name): the fields above
	// claim nothing. A router still sends it tools, schemas and streams,
	// as it does not check a window of 0, and leaves the answer to the
	// server; images go only to a model known to take them.
	Unknown bool
}

// Candidate is one model a Router may call.
type Candidate struct {
	// Provider answers for the model; wrap it with Retry so that it
	// counts as unavailable only once its retries are spent.
	Provider Provider
	// Name is the provider's name ("openai"); Model the model id.
	Name, Model string
	Caps        Capabilities
	// Price is used against a router's cost ceiling, and by Cheapest.
	// Unpriced says the price is not known: such a model is above any
	// ceiling, and Cheapest puts it last.
	Price    Price
	Unpriced bool
	// Latency is how long the candidate's calls have taken through this
	// router, a moving average (0: not measured yet); a Router sets it
	// for its Strategy, which Fastest orders by.
	Latency time.Duration
	index   int // its place in the router's candidates
}

// Needs is what a request asks of a model.
type Needs struct {
	Tools, StructuredOutput, Streaming, Vision bool
	// PromptTokens estimates the request's size.
	PromptTokens int
}

// NeedsOf estimates what req needs (about four characters a token).
func NeedsOf(req *Request, streaming bool) Needs {
	n := Needs{Tools: len(req.Tools) > 0, StructuredOutput: len(req.ResponseSchema) > 0, Streaming: streaming}
	chars := 0
	for i := range req.Messages {
		m := &req.Messages[i]
		chars += len(m.Content)
		if len(m.Images()) > 0 {
			n.Vision = true
		}
		for _, c := range m.ToolCalls {
			chars += len(c.Arguments) + len(c.Name)
		}
	}
	for _, t := range req.Tools {
		chars += len(t.Description) + len(t.Parameters)
	}
	n.PromptTokens = chars/4 + 1
	return n
}

// Supports reports whether c can serve n, and if not, why. A model of
// unknown capabilities is tried for anything but images: most served
// models call tools, take a schema and stream, and refusing them would
// send every such request past a local model; a text-only model may drop
// images, so they go only where they are known to be taken.
func (c Candidate) Supports(n Needs) (bool, string) {
	unknown := c.Caps.Unknown
	switch {
	case n.Tools && !c.Caps.Tools && !unknown:
		return false, "no tool calling"
	case n.StructuredOutput && !c.Caps.StructuredOutput && !unknown:
		return false, "no structured output"
	case n.Streaming && !c.Caps.Streaming && !unknown:
		return false, "no streaming"
	case n.Vision && !c.Caps.Vision && unknown:
		return false, "image input unknown"
	case n.Vision && !c.Caps.Vision:
		return false, "no image input"
	case c.Caps.ContextWindow > 0 && n.PromptTokens > c.Caps.ContextWindow:
		return false, fmt.Sprintf("context window of %d tokens is too small", c.Caps.ContextWindow)
	}
	return true, ""
}

// Strategy orders the candidates for one request; the Router tries them in
// that order. It may drop candidates. The default keeps the given order.
type Strategy func(req *Request, n Needs, cands []Candidate) []Candidate

// Cheapest orders the candidates by price, the least costly first for a
// request of n's size (a prompt of n.PromptTokens, and as many
// completion tokens); ties in the order given, unpriced models last.
func Cheapest(_ *Request, n Needs, cands []Candidate) []Candidate {
	cost := func(c Candidate) float64 {
		if c.Unpriced {
			return math.Inf(1)
		}
		t := float64(max(n.PromptTokens, 1))
		return c.Price.Prompt*t + c.Price.Completion*t
	}
	slices.SortStableFunc(cands, func(a, b Candidate) int { return cmp.Compare(cost(a), cost(b)) })
	return cands
}

// Fastest orders the candidates by the latency measured through the
// router, the quickest first; one not measured yet comes first, in the
// order given, so that each is measured once it serves a call.
func Fastest(_ *Request, _ Needs, cands []Candidate) []Candidate {
	slices.SortStableFunc(cands, func(a, b Candidate) int { return cmp.Compare(a.Latency, b.Latency) })
	return cands
}

// RouterOptions configure a Router.
type RouterOptions struct {
	// Strategy orders the candidates; nil keeps them in priority order.
	Strategy Strategy
	// MaxPromptPrice and MaxCompletionPrice, when set, skip candidates
	// that cost more (USD per million tokens): a cost ceiling.
	MaxPromptPrice, MaxCompletionPrice float64
}

// Router is a Provider over several candidates: for each request it picks
// the first candidate that supports what the request needs, and falls over
// to the next when one is unavailable (rate limited past its retries,
// overloaded, down). Any other failure is returned as it is.
type Router struct {
	cands []Candidate
	opts  RouterOptions

	mu      sync.Mutex
	latency []time.Duration // by candidate, a moving average of its answers
}

// NewRouter returns a router over cands, in priority order.
func NewRouter(cands []Candidate, opts RouterOptions) *Router {
	cands = slices.Clone(cands)
	for i := range cands {
		cands[i].index = i
	}
	return &Router{cands: cands, opts: opts, latency: make([]time.Duration, len(cands))}
}

// measured notes how long a candidate took to answer: a moving average,
// each answer a fifth of it.
func (r *Router) measured(c Candidate, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := &r.latency[c.index]; *l == 0 {
		*l = d
	} else {
		*l += (d - *l) / 5
	}
}

func (r *Router) plan(req *Request, streaming bool) ([]Candidate, error) {
	n := NeedsOf(req, streaming)
	order := r.cands
	if r.opts.Strategy != nil {
		order = slices.Clone(r.cands)
		r.mu.Lock()
		for i := range order {
			order[i].Latency = r.latency[i]
		}
		r.mu.Unlock()
		order = r.opts.Strategy(req, n, order)
	}
	var out []Candidate
	var why []string
	for _, c := range order {
		ok, reason := c.Supports(n)
		if ok && c.Unpriced && (r.opts.MaxPromptPrice > 0 || r.opts.MaxCompletionPrice > 0) {
			ok, reason = false, "unpriced, so above the price ceiling"
		}
		if ok && r.opts.MaxPromptPrice > 0 && c.Price.Prompt > r.opts.MaxPromptPrice {
			ok, reason = false, "above the prompt price ceiling"
		}
		if ok && r.opts.MaxCompletionPrice > 0 && c.Price.Completion > r.opts.MaxCompletionPrice {
			ok, reason = false, "above the completion price ceiling"
		}
		if ok {
			out = append(out, c)
		} else {
			why = append(why, c.Name+":"+c.Model+": "+reason)
		}
	}
	if len(out) == 0 {
		return nil, &APIError{Kind: KindInvalidRequest, Provider: "router", Message: strings.Join(why, "; "), Err: ErrNoCandidate}
	}
	return out, nil
}

// unavailable reports whether a failure means "try another model".
func unavailable(err error) bool {
	switch KindOf(err) {
	case KindRateLimited, KindOverloaded, KindTransient:
		return true
	}
	return false
}

// Generate calls the candidates in turn until one answers.
func (r *Router) Generate(ctx context.Context, req *Request) (*Response, error) {
	order, err := r.plan(req, false)
	if err != nil {
		return nil, err
	}
	var last error
	for i, c := range order {
		start := time.Now()
		cr := *req
		cr.Model = c.Model
		resp, err := c.Provider.Generate(ctx, &cr)
		if err == nil {
			r.measured(c, time.Since(start))
			if resp != nil {
				resp.Provider = c.Name
				if resp.Model == "" {
					resp.Model = c.Model
				}
			}
			return resp, nil
		}
		last = err
		if ctx.Err() != nil || !unavailable(err) {
			return nil, err
		}
		r.fallback(ctx, c, order, i, err, start)
	}
	return nil, last
}

// Stream streams from the first candidate that answers; a candidate that
// fails after it has yielded a chunk is not replaced.
func (r *Router) Stream(ctx context.Context, req *Request) iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		order, err := r.plan(req, true)
		if err != nil {
			yield(Chunk{}, err)
			return
		}
		for i, c := range order {
			start := time.Now()
			cr := *req
			cr.Model = c.Model
			s, ok := c.Provider.(Streamer)
			if !ok {
				resp, err := c.Provider.Generate(ctx, &cr)
				if err == nil {
					r.measured(c, time.Since(start))
					for _, ch := range responseChunks(resp, c) {
						if !yield(ch, nil) {
							return
						}
					}
					return
				}
				if ctx.Err() != nil || !unavailable(err) || i == len(order)-1 {
					yield(Chunk{}, err)
					return
				}
				r.fallback(ctx, c, order, i, err, start)
				continue
			}
			emitted := false
			var failure error
			for ch, err := range s.Stream(ctx, &cr) {
				if err != nil {
					failure = err
					break
				}
				if !emitted && ch.Model == "" {
					ch.Model = c.Model
				}
				emitted = true
				if !yield(ch, nil) {
					return
				}
			}
			if failure == nil {
				r.measured(c, time.Since(start))
				return
			}
			if emitted || ctx.Err() != nil || !unavailable(failure) || i == len(order)-1 {
				yield(Chunk{}, failure)
				return
			}
			r.fallback(ctx, c, order, i, failure, start)
		}
	}
}

func (r *Router) fallback(ctx context.Context, from Candidate, order []Candidate, i int, err error, start time.Time) {
	if t := TraceFrom(ctx); t != nil && i+1 < len(order) {
		t.Fallback(FallbackInfo{FromProvider: from.Name, FromModel: from.Model,
			ToProvider: order[i+1].Name, ToModel: order[i+1].Model, Err: err, Took: time.Since(start)})
	}
}

// responseChunks turns a whole response into chunks for a stream.
func responseChunks(resp *Response, c Candidate) []Chunk {
	var out []Chunk
	if resp.Content != "" {
		out = append(out, Chunk{Text: resp.Content})
	}
	for i, tc := range resp.ToolCalls {
		out = append(out, Chunk{ToolCall: &ToolCallDelta{Index: i, ID: tc.ID, Name: tc.Name, Arguments: string(tc.Arguments)}})
	}
	u := resp.Usage
	model := resp.Model
	if model == "" {
		model = c.Model
	}
	return append(out, Chunk{Usage: &u, Model: model, FinishReason: resp.FinishReason})
}

// FallbackInfo describes a fall-over from one model to the next.
type FallbackInfo struct {
	FromProvider, FromModel string
	ToProvider, ToModel     string
	Err                     error
	// Took is how long the model given up on was tried, its retries
	// included.
	Took time.Duration
}
