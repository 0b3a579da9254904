// The model call: calling the provider chain, accounting for tokens and
// cost, and reporting retries and fall-overs.

package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
)

// Retry reports a retry of a model call as a retry event and a log
// record; a run is its model calls' llm.Trace.
func (r *run) Retry(info llm.RetryInfo) {
	r.attempts++
	n := r.note()
	n.retries++
	n.lastRetryError = info.Err.Error()
	r.logger.retry(info.Attempt, info.Wait, info.Err)
	if r.s.bus.Active() {
		r.emit(event.Event{Type: event.Retry, Attempt: info.Attempt, WaitMS: info.Wait.Milliseconds(),
			Error: &event.ErrorInfo{Code: CodeLLMError, Message: info.Err.Error()}})
	}
}

// Fallback reports a fall-over to the next model as a retry event, and
// the model given up on as a model call of its own, failed: each model
// a turn tried is itemised, with its own attempts and time.
func (r *run) Fallback(info llm.FallbackInfo) {
	d := info.Took
	if r.fixed {
		d = 0 // a fixed clock does not move
	}
	mc := ModelCall{Turn: r.st.Turn, Provider: info.FromProvider, Model: info.FromModel, DurationMS: ms(d),
		Attempts: int(r.attempts - r.triedBefore), Error: info.Err.Error()}
	if r.a != r.s.agent {
		mc.Agent = r.a.spec.AgentName
	}
	r.trace.call(&mc, d, r.s.agent)
	r.logger.modelCall(&mc, info.Err)
	r.note().fellFor += d // the next model's time is the call's, less this
	r.triedBefore = r.attempts
	r.attempts++
	r.logger.fallback(info)
	if r.s.bus.Active() {
		r.emit(event.Event{Type: event.Retry, Error: &event.ErrorInfo{Code: CodeLLMError, Message: info.Err.Error()},
			Data: map[string]any{"fallback_from": info.FromProvider + ":" + info.FromModel, "fallback_to": info.ToProvider + ":" + info.ToModel}})
	}
}

// callModel calls the agent's model with the transcript and accounts for
// the call.
func (r *run) callModel(ctx context.Context) (*llm.Response, error) {
	st, a := r.st, r.a
	if r.s.provider == nil {
		return nil, fmt.Errorf("%w: agent %s has no model", ErrConfig, a.spec.AgentName)
	}
	if r.limits.window > 0 {
		if err := r.fit(ctx, false); err != nil {
			return nil, err
		}
	}
	r.req.Messages = st.Messages
	r.req.ToolChoice = r.toolChoice(st.Turn)
	r.attempts, r.triedBefore = 1, 0
	if r.notes != nil {
		r.notes.fellFor = 0
	}
	start := time.Now()
	resp, err := r.generate(ctx)
	if err != nil && r.a.compaction != spec.CompactOff && errors.Is(err, llm.ErrContextTooLong) {
		resp, err = r.refit(ctx, err) // the provider knows its window better than the table
	}
	d := r.since(start, time.Now())
	st.ModelLatencyMS += ms(d)
	if r.notes != nil {
		d = max(d-r.notes.fellFor, 0) // the model that answered (or failed last): its own time
	}
	mc := ModelCall{Turn: st.Turn, Provider: a.providerName, Model: a.model, DurationMS: ms(d), Attempts: int(r.attempts - r.triedBefore)}
	if a != r.s.agent {
		mc.Agent = a.spec.AgentName // the conversation was handed off
	}
	if err == nil && resp == nil {
		err = &llm.APIError{Kind: llm.KindInvalidRequest, Provider: a.providerName, Model: a.model, Message: "provider returned no response"}
	}
	if err != nil {
		mc.Error = err.Error()
		if resp != nil { // a broken stream: keep what arrived
			r.account(resp, &mc)
			mc.Partial = resp.Content
		}
		r.trace.call(&mc, d, r.s.agent)
		r.logger.modelCall(&mc, err)
		return nil, err
	}
	r.account(resp, &mc)
	r.trace.call(&mc, d, r.s.agent)
	r.logger.modelCall(&mc, nil)
	return resp, nil
}

// generate calls the provider chain, streaming when someone takes
// content_chunk events, the chain can, and no output filter must see the
// answer first.
func (r *run) generate(ctx context.Context) (*llm.Response, error) {
	// An agent whose policy filters its output does not stream: the text
	// would reach subscribers before the filter sees the answer.
	if sp, ok := r.s.provider.(llm.Streamer); ok && r.s.bus.Wants(event.ContentChunk) && r.a.outFilters == nil {
		if r.stream == nil {
			r.stream = &chunker{r: r} // once a run, not once a call
			r.stream.fn = r.stream.add
		}
		defer r.stream.flush()
		return llm.Collect(sp.Stream(ctx, &r.req), r.stream.fn)
	}
	return r.s.provider.Generate(ctx, &r.req)
}

// chunker emits streamed text as content_chunk events a little behind
// the provider, so that a secret cut between the provider's chunks is
// redacted whole. It holds back the last streamLag bytes and the token
// they end in, never cuts where redacting the text up to the cut differs
// from redacting all of it (a secret, a bearer header or a card number
// would straddle the cut), and holds an unfinished PEM block whole.
type chunker struct {
	r    *run
	fn   func(llm.Chunk) // add, as a func value made once
	held []byte
}

const (
	// streamLag is how far events stay behind the provider: longer than
	// the secret shapes that hold spaces (a bearer header, a spaced card
	// or IBAN).
	streamLag = 64
	// maxHeld is how much text with no place to cut waits before it goes
	// out anyway: no secret shape without spaces is longer.
	maxHeld = 16 << 10
)

func (c *chunker) add(ch llm.Chunk) {
	if ch.Text == "" {
		return
	}
	c.held = append(c.held, ch.Text...)
	if len(c.held) <= streamLag {
		return
	}
	cut := c.safe(tokenEnd(c.held, len(c.held)-streamLag))
	if cut <= 0 {
		if len(c.held) < maxHeld {
			return
		}
		cut = len(c.held) - streamLag
		for cut > 0 && !utf8.RuneStart(c.held[cut]) {
			cut--
		}
	}
	c.r.emit(event.Event{Type: event.ContentChunk, Content: string(c.held[:cut])})
	c.held = c.held[:copy(c.held, c.held[cut:])]
}

// safe moves cut back until nothing the redactor finds straddles it, and
// before an unfinished PEM block; 0 when no place is safe yet.
func (c *chunker) safe(cut int) int {
	red := c.r.a.redact
	var whole string
	for cut > 0 {
		if i := bytes.LastIndex(c.held[:cut], []byte("-----BEGIN")); i >= 0 && !pemEnded(c.held[i:]) {
			cut = tokenEnd(c.held, i)
			continue
		}
		if whole == "" {
			whole = red.String(string(c.held))
		}
		if strings.HasPrefix(whole, red.String(string(c.held[:cut]))) {
			return cut
		}
		cut = tokenEnd(c.held, cut-1)
	}
	return 0
}

// pemEnded says a PEM block's text has its end line: "-----END", its
// label and "-----".
func pemEnded(b []byte) bool {
	_, after, ok := bytes.Cut(b, []byte("-----END"))
	return ok && bytes.Contains(after, []byte("-----"))
}

// tokenEnd is the last place at or before at where text may be cut
// without cutting a token a secret could be (letters, digits and
// - _ + / = . ~ :): just after a byte outside them, or 0.
func tokenEnd(b []byte, at int) int {
	for i := min(at, len(b)) - 1; i >= 0; i-- {
		switch c := b[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.IndexByte("-_+/=.~:", c) >= 0:
		default:
			if c >= utf8.RuneSelf && !utf8.RuneStart(b[i]) {
				continue // inside a multi-byte character: cut after it
			}
			if c >= utf8.RuneSelf {
				// A multi-byte character ends where the next rune starts.
				_, n := utf8.DecodeRune(b[i:])
				return i + n
			}
			return i + 1
		}
	}
	return 0
}

// flush emits what is held when a streamed reply ends.
func (c *chunker) flush() {
	if len(c.held) > 0 {
		c.r.emit(event.Event{Type: event.ContentChunk, Content: string(c.held)})
		c.held = c.held[:0]
	}
}

// account adds a call's usage and cost to the run.
func (r *run) account(resp *llm.Response, mc *ModelCall) {
	if resp.Provider != "" {
		mc.Provider = resp.Provider
		r.st.Provider = resp.Provider
	}
	model := resp.Model
	if model == "" {
		model = r.a.ownPrice.model
	} else {
		mc.Model = model
		r.st.Model = model
	}
	if r.price == nil || model != r.price.model {
		r.price = r.a.priceOf(model)
	}
	if !r.price.ok {
		r.unpriced = true
	}
	mc.PromptTokens, mc.CompletionTokens = resp.Usage.PromptTokens, resp.Usage.CompletionTokens
	mc.CostUSD = r.price.price.Cost(resp.Usage)
	r.st.Usage.Add(resp.Usage)
	r.st.CostUSD += mc.CostUSD
}

// modelPrice is a model's price as the pricing table has it.
type modelPrice struct {
	model string
	price llm.Price
	ok    bool
}

// priceOf is model's price: the agent's own, looked up when it was made,
// or another (a router's or fallback's model), looked up now.
func (a *Agent) priceOf(model string) *modelPrice {
	if model == a.ownPrice.model {
		return &a.ownPrice
	}
	p := &modelPrice{model: model}
	p.price, p.ok = a.pricing.Lookup(model)
	return p
}
