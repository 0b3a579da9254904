package llm

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"strings"
	"sync"
	"sync/atomic"
)

//go:embed pricing.json
var defaultPricingJSON []byte

// Price is what a model costs, in USD per million tokens.
type Price struct {
	Prompt     float64 `json:"prompt"`
	Completion float64 `json:"completion"`
	// CachedPrompt prices prompt tokens served from the provider's cache;
	// 0 means they cost the same as other prompt tokens.
	CachedPrompt float64 `json:"cached_prompt,omitempty"`
}

// Cost returns the price of u in USD.
func (p Price) Cost(u Usage) float64 {
	cached := min(u.CachedPromptTokens, u.PromptTokens)
	cachedPrice := p.CachedPrompt
	if cachedPrice == 0 {
		cachedPrice = p.Prompt
	}
	return (float64(u.PromptTokens-cached)*p.Prompt +
		float64(cached)*cachedPrice +
		float64(u.CompletionTokens)*p.Completion) / 1e6
}

// Pricing maps model ids to prices. It is read-only once built and safe
// for concurrent use.
type Pricing struct {
	models map[string]Price

	// resolved caches what Lookup found for ids not in models (dated or
	// prefixed ids, unknown ones), which take a scan of the table.
	resolved  sync.Map // string → lookup
	nResolved atomic.Int32
}

type lookup struct {
	price Price
	ok    bool
}

// maxResolved bounds the cache: ids come from providers' replies.
const maxResolved = 1024

type pricingFile struct {
	Format   string           `json:"format"`
	Currency string           `json:"currency,omitempty"`
	Unit     string           `json:"unit,omitempty"`
	Models   map[string]Price `json:"models"`
}

// ParsePricing reads a pricing table in the format of the embedded
// pricing.json: {"models": {"gpt-4.1-mini": {"prompt": 0.4, "completion":
// 1.6, "cached_prompt": 0.1}}}, USD per million tokens.
func ParsePricing(data []byte) (*Pricing, error) {
	var f pricingFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("pricing: %w", err)
	}
	if f.Currency != "" && f.Currency != "USD" {
		return nil, fmt.Errorf("pricing: currency %q is not supported (use USD)", f.Currency)
	}
	for name, p := range f.Models {
		if p.Prompt < 0 || p.Completion < 0 || p.CachedPrompt < 0 {
			return nil, fmt.Errorf("pricing: model %q: negative price", name)
		}
	}
	if f.Models == nil {
		f.Models = map[string]Price{}
	}
	return &Pricing{models: f.Models}, nil
}

var defaultPricing = func() *Pricing {
	p, err := ParsePricing(defaultPricingJSON)
	if err != nil {
		panic(err) // the embedded file is tested
	}
	return p
}()

// DefaultPricing returns the embedded pricing table.
func DefaultPricing() *Pricing { return defaultPricing }

// LoadPricingFile returns the embedded table with the entries of the file
// at path added or replaced.
func LoadPricingFile(path string) (*Pricing, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pricing: %w", err)
	}
	over, err := ParsePricing(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return DefaultPricing().With(over), nil
}

// With returns a table holding p's entries overridden by those of over.
func (p *Pricing) With(over *Pricing) *Pricing {
	m := maps.Clone(p.models)
	maps.Copy(m, over.models)
	return &Pricing{models: m}
}

// Models returns the model ids the table prices.
func (p *Pricing) Models() []string {
	out := make([]string, 0, len(p.models))
	for k := range p.models {
		out = append(out, k)
	}
	return out
}

// Lookup finds the price of model. It tries the id as given, then without a
// "provider:" prefix, then the longest priced id that the model id extends
// with "-" (a dated snapshot such as gpt-4.1-mini-2025-04-14). A fine-tuned
// id "ft:BASE:org:name:id" is priced as "ft:BASE", then as BASE.
func (p *Pricing) Lookup(model string) (Price, bool) {
	if p == nil {
		return Price{}, false
	}
	if pr, ok := p.models[model]; ok {
		return pr, true
	}
	if l, ok := p.resolved.Load(model); ok {
		return l.(lookup).price, l.(lookup).ok
	}
	pr, ok := p.resolve(model)
	if p.nResolved.Load() < maxResolved {
		if _, loaded := p.resolved.LoadOrStore(model, lookup{pr, ok}); !loaded {
			p.nResolved.Add(1)
		}
	}
	return pr, ok
}

func (p *Pricing) resolve(model string) (Price, bool) {
	if rest, ok := strings.CutPrefix(model, "ft:"); ok {
		base, _, _ := strings.Cut(rest, ":")
		if pr, ok := p.lookupBase("ft:" + base); ok {
			return pr, true
		}
		return p.lookupBase(base)
	}
	if i := strings.IndexByte(model, ':'); i >= 0 {
		return p.Lookup(model[i+1:])
	}
	return p.lookupBase(model)
}

func (p *Pricing) lookupBase(model string) (Price, bool) {
	if pr, ok := p.models[model]; ok {
		return pr, true
	}
	best, found := "", false
	var bp Price
	for k, pr := range p.models {
		if len(k) > len(best) && strings.HasPrefix(model, k+"-") {
			best, bp, found = k, pr, true
		}
	}
	return bp, found
}

// has reports whether the table names model itself, or a dated or
// "-latest" release of a model it names (claude-sonnet-4-5-20250929,
// gpt-4.1-2025-04-14): stricter than Lookup, which prices any id that
// starts with a known one, so a misspelt id is not taken for a release.
func (p *Pricing) has(model string) bool {
	if p == nil {
		return false
	}
	if _, ok := p.models[model]; ok {
		return true
	}
	for k := range p.models {
		if rest, ok := strings.CutPrefix(model, k+"-"); ok && (rest == "latest" || strings.Trim(rest, "0123456789-") == "") {
			return true
		}
	}
	return false
}

// Cost returns the price of u on model in USD, and false when the model is
// not in the table (the cost is then 0).
func (p *Pricing) Cost(model string, u Usage) (float64, bool) {
	pr, ok := p.Lookup(model)
	if !ok {
		return 0, false
	}
	return pr.Cost(u), true
}

// NewPricing returns a table of the given prices (USD per million tokens).
func NewPricing(models map[string]Price) *Pricing {
	return &Pricing{models: maps.Clone(models)}
}
