package llm

import (
	"fmt"
	"strings"

	"github.com/agentry/agentry/internal/registry"
)

// Config is what Open passes to a provider's constructor.
type Config struct {
	// BaseURL points an HTTP provider at another server.
	BaseURL string
	// APIKey overrides the provider's key from the environment.
	APIKey string
	// Dir resolves relative file paths in a model name (such as
	// "scripted:turns.json"); empty means the working directory.
	Dir string
}

// Driver is what a provider package registers: how to open a model, which
// model ids it claims without a "provider:" prefix, and what it knows of
// its models.
type Driver struct {
	// Open builds a Provider for one model id.
	Open func(model string, cfg Config) (Provider, error)
	// Prefixes are the beginnings of model ids that name this provider
	// when no "provider:" prefix is written ("gpt-", "claude").
	Prefixes []string
	// ContextWindow returns a model's context window in tokens, 0 when
	// unknown; nil means unknown for every model.
	ContextWindow func(model string) int
	// Known reports whether the provider's catalog has the model id, for
	// a check that catches a misspelt name before a run; nil means the
	// provider keeps no catalog (a local server takes any name).
	Known func(model string) bool
	// Capabilities says what a model can do, honestly per model (an
	// older model may call no tools or take no JSON schema, or no
	// images), and Capabilities{Unknown: true} for a model the provider
	// cannot vouch for; its ContextWindow is filled from ContextWindow.
	// nil says every model calls tools, takes a schema and streams, and
	// takes no images.
	Capabilities func(model string) Capabilities
	// Resolve is the model id as cfg finds it (a file's absolute path,
	// for a provider that reads one), so that two names of one model
	// compare equal; nil: the id as written.
	Resolve func(model string, cfg Config) string
}

// Resolve is name as cfg finds it, "provider:model", the model id
// resolved by its provider (a scripted model's file, by its absolute
// path): two names that resolve alike name one model. A name whose
// provider is unknown is itself.
func Resolve(name string, cfg Config) string {
	provider, model := ParseModel(name)
	d, ok := drivers.Get(provider)
	if !ok || d.Resolve == nil {
		return name
	}
	return provider + ":" + d.Resolve(model, cfg)
}

// Info is what agentry knows of the model name stands for: its provider's
// report of its capabilities, and whether the provider is built in.
func Info(name string) (Capabilities, bool) {
	provider, model := ParseModel(name)
	d, ok := drivers.Get(provider)
	if !ok {
		return Capabilities{}, false
	}
	return d.capabilities(model), true
}

func (d Driver) capabilities(model string) Capabilities {
	caps := Capabilities{Tools: true, StructuredOutput: true, Streaming: true}
	if d.Capabilities != nil {
		caps = d.Capabilities(model)
	}
	if d.ContextWindow != nil {
		caps.ContextWindow = d.ContextWindow(model)
	}
	return caps
}

// Unknown reports whether name's provider keeps a catalog of its models
// that lacks this one (a misspelt id, or a model newer than this
// release): a warning, not an error, since a provider may serve it.
func Unknown(name string) (provider string, unknown bool) {
	provider, model := ParseModel(name)
	d, ok := drivers.Get(provider)
	if !ok || d.Known == nil {
		return provider, false
	}
	return provider, !d.Known(model)
}

// InCatalog says whether the embedded pricing table (DefaultPricing)
// names model, or a dated or "-latest" release of a model it names: the
// catalog of the built-in providers, which their Driver.Known use. A
// driver of another provider may use it for models it shares with them.
func InCatalog(model string) bool {
	return DefaultPricing().has(model)
}

var drivers registry.Registry[Driver]

// Register makes a provider available to Open under name, in the manner of
// database/sql drivers: a provider package calls it from init. Registering
// the same name twice, or a driver without Open, panics: both are
// programming errors.
func Register(name string, d Driver) {
	if d.Open == nil {
		panic("llm: Register of a driver without Open for " + name)
	}
	if !drivers.Add(name, d) {
		panic("llm: Register called twice for provider " + name)
	}
}

// Providers returns the names of the registered providers, sorted.
func Providers() []string { return drivers.Names() }

// ParseModel splits a model name into provider and model id. A
// "provider:model" prefix naming a registered provider wins; then a
// registered driver that claims the id's beginning ("gpt-…" and "ft:…"
// for openai, "claude…" for anthropic); then any other "name:" prefix, so
// that Open can say that provider is not built in. Otherwise the provider
// is "".
func ParseModel(name string) (provider, model string) {
	p, m, prefixed := strings.Cut(name, ":")
	if _, ok := drivers.Get(p); prefixed && ok {
		return p, m
	}
	// The longest claimed prefix wins, so that the answer does not depend
	// on the order of a map.
	best, bestLen := "", 0
	for dn, d := range drivers.All() {
		for _, pre := range d.Prefixes {
			if len(pre) > bestLen && strings.HasPrefix(name, pre) {
				best, bestLen = dn, len(pre)
			}
		}
	}
	if best != "" {
		return best, name
	}
	if prefixed && p != "" && strings.IndexFunc(p, func(r rune) bool { return (r < 'a' || r > 'z') && r != '-' }) < 0 {
		return p, m
	}
	return "", name
}

// Model is an opened model: its Provider, the provider's name, the model
// id calls are made with, and what the driver knows of it.
type Model struct {
	Provider     Provider
	ProviderName string
	ID           string
	Capabilities Capabilities
}

// Open returns the model a name written in a spec stands for
// ("scripted:turns.json", "gpt-4.1-mini", "ollama:qwen3").
func Open(name string, cfg Config) (*Model, error) {
	provider, model := ParseModel(name)
	if provider == "" {
		return nil, fmt.Errorf("%w: cannot tell the provider of model %q; write it as PROVIDER:MODEL (registered: %s)",
			ErrUnknownProvider, name, strings.Join(Providers(), ", "))
	}
	d, ok := drivers.Get(provider)
	if !ok {
		return nil, fmt.Errorf("%w: provider %q of model %q is not built in (registered: %s)",
			ErrUnknownProvider, provider, name, strings.Join(Providers(), ", "))
	}
	p, err := d.Open(model, cfg)
	if err != nil {
		return nil, err
	}
	return &Model{Provider: p, ProviderName: provider, ID: model, Capabilities: d.capabilities(model)}, nil
}
