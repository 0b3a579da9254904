package llm

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
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

// OpenFunc builds a Provider for one model id of a provider.
type OpenFunc func(model string, cfg Config) (Provider, error)

var (
	driversMu sync.RWMutex
	drivers   = map[string]OpenFunc{}
)

// Register makes a provider available to Open under name, in the manner of
// database/sql drivers: a provider package calls it from init. Registering
// the same name twice panics, as it is a programming error.
func Register(name string, open OpenFunc) {
	driversMu.Lock()
	defer driversMu.Unlock()
	if open == nil {
		panic("llm: Register of nil OpenFunc for " + name)
	}
	if _, dup := drivers[name]; dup {
		panic("llm: Register called twice for provider " + name)
	}
	drivers[name] = open
}

// Providers returns the names of the registered providers, sorted.
func Providers() []string {
	driversMu.RLock()
	defer driversMu.RUnlock()
	names := make([]string, 0, len(drivers))
	for n := range drivers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// ErrUnknownProvider is returned by Open for a provider that is not
// registered.
var ErrUnknownProvider = errors.New("llm: unknown provider")

// ParseModel splits a model name into provider and model id: an explicit
// "provider:model" prefix wins (when provider is registered or is one of
// the known vendor names); otherwise the vendor is inferred from the id
// ("gpt-…", "o3", "ft:…" are openai; "claude-…" anthropic; "gemini-…"
// gemini).
func ParseModel(name string) (provider, model string) {
	if p, m, ok := strings.Cut(name, ":"); ok && p != "ft" {
		driversMu.RLock()
		_, reg := drivers[p]
		driversMu.RUnlock()
		if reg || slices.Contains(knownVendors, p) {
			return p, m
		}
	}
	return inferVendor(name), name
}

var knownVendors = []string{"openai", "azure", "anthropic", "gemini", "ollama", "scripted", "openrouter"}

func inferVendor(model string) string {
	switch {
	case strings.HasPrefix(model, "gpt-"), strings.HasPrefix(model, "ft:"),
		strings.HasPrefix(model, "chatgpt-"), strings.HasPrefix(model, "o1"),
		strings.HasPrefix(model, "o3"), strings.HasPrefix(model, "o4"):
		return "openai"
	case strings.HasPrefix(model, "claude"):
		return "anthropic"
	case strings.HasPrefix(model, "gemini"):
		return "gemini"
	}
	return ""
}

// Open returns a Provider for a model name as written in a spec
// ("scripted:turns.json", "gpt-4.1-mini", "ollama:qwen3"), with the
// provider's name and the model id it will be called with.
func Open(name string, cfg Config) (p Provider, provider, model string, err error) {
	provider, model = ParseModel(name)
	if provider == "" {
		return nil, "", "", fmt.Errorf("%w: cannot tell the provider of model %q; write it as PROVIDER:MODEL (registered: %s)",
			ErrUnknownProvider, name, strings.Join(Providers(), ", "))
	}
	driversMu.RLock()
	open, ok := drivers[provider]
	driversMu.RUnlock()
	if !ok {
		return nil, "", "", fmt.Errorf("%w: provider %q of model %q is not built in (registered: %s)",
			ErrUnknownProvider, provider, name, strings.Join(Providers(), ", "))
	}
	p, err = open(model, cfg)
	if err != nil {
		return nil, "", "", err
	}
	return p, provider, model, nil
}
