// Package tool defines what agents can call: the Tool interface, a
// Registry, Func for typed Go functions with derived and enforced JSON
// schemas, the StandardToolResult, and Invoke, which runs one call with a
// timeout, panic recovery and retries.
package tool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Idempotency says what repeating a call does, which decides whether a
// failed call may be retried and whether it must be logged before it runs.
type Idempotency string

// The idempotency classes.
const (
	// Safe tools only read: repeating them changes nothing.
	Safe Idempotency = "safe"
	// Idempotent tools change state, but repeating a call changes nothing more.
	Idempotent Idempotency = "idempotent"
	// NonIdempotent tools must not be repeated blindly.
	NonIdempotent Idempotency = "non_idempotent"
)

// Retryable reports whether a failed call of this class may be repeated.
func (c Idempotency) Retryable() bool { return c == Safe || c == Idempotent }

// Valid reports whether c is one of the three classes.
func (c Idempotency) Valid() bool { return c == Safe || c == Idempotent || c == NonIdempotent }

// Risk is how much harm a tool's call can do (the jeeves seed's risk
// level), from which its idempotency class is inferred when it gives
// none.
type Risk string

// The risk levels.
const (
	RiskLow      Risk = "low"      // reads: inferred safe
	RiskMedium   Risk = "medium"   // changes what can be set again: inferred idempotent
	RiskHigh     Risk = "high"     // changes what cannot be undone: inferred non-idempotent
	RiskCritical Risk = "critical" // money, deletion, people: inferred non-idempotent
)

// Valid reports whether r is one of the four levels.
func (r Risk) Valid() bool {
	return r == RiskLow || r == RiskMedium || r == RiskHigh || r == RiskCritical
}

// IdempotencyOf is the class a risk level implies: low is Safe, medium
// Idempotent, high and critical (and an unknown level) NonIdempotent.
func IdempotencyOf(r Risk) Idempotency {
	switch r {
	case RiskLow:
		return Safe
	case RiskMedium:
		return Idempotent
	}
	return NonIdempotent
}

// Info is what a tool says about itself.
type Info struct {
	// Name is how models call the tool: 1 to 64 letters, digits, '_' or '-'.
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments object.
	Parameters json.RawMessage
	// Idempotency defaults to what Risk implies, else NonIdempotent, when
	// empty.
	Idempotency Idempotency
	// Risk is how much harm a call can do; it sets Idempotency when that
	// is empty.
	Risk Risk
	// Timeout bounds one call; 0 leaves it to the agent's limits.
	Timeout time.Duration
	// Examples are argument objects of good calls. Models see them with
	// the description (native tool descriptions and the ReAct prompt).
	Examples []json.RawMessage
	// Deduplicates says that the tool makes repeating a call with the
	// same idempotency key (Call.Key) harmless: it sends the key to a
	// service that keeps each key's effect once. A resumed run sends a
	// non-idempotent call of such a tool again when it cannot know
	// whether the first one took effect, instead of asking for approval.
	Deduplicates bool
	// DependsOn names the tools whose results a call of this one needs
	// (the Noema spec's AgentHints dependencies, declared ahead): when a
	// turn calls this tool and one of those, this call runs after theirs,
	// not beside them. A result's hints' dependencies replace it for the
	// rest of the run.
	DependsOn []string
}

// Deduplicator is implemented by tools that deduplicate some calls and
// not others (an HTTP tool: only for hosts known to keep one effect per
// Idempotency-Key). Its answer replaces Info.Deduplicates for that call;
// ctx is the call's.
type Deduplicator interface {
	Deduplicates(ctx context.Context, args json.RawMessage) bool
}

// Classifier is implemented by tools whose calls differ in class by
// their arguments (an HTTP tool: GET is safe, POST is not). Its answer
// replaces Info.Idempotency for that call.
type Classifier interface {
	Idempotency(args json.RawMessage) Idempotency
}

// Tool is something an agent can call. Call receives the arguments as the
// model wrote them (a JSON object) and returns the result as JSON. A Tool
// must honour ctx: when it is done, the call has timed out or the run was
// aborted, and the result will be discarded.
type Tool interface {
	Info() Info
	Call(ctx context.Context, args json.RawMessage) (json.RawMessage, error)
}

// ValidName reports whether name can name a tool.
func ValidName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// NameFor is a name models accept made of s: each character but letters,
// digits, '_' and '-' replaced by '_'; past 64 characters, the first 55
// and a hash of the whole. Tools named elsewhere (an MCP server's, a
// remote A2A agent's) take their names from it.
func NameFor(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	name := b.String()
	if len(name) > 64 || name == "" {
		sum := sha256.Sum256([]byte(s))
		name = name[:min(len(name), 55)] + "_" + hex.EncodeToString(sum[:4])
	}
	return name
}

// Registry holds tools by name. Lookup is O(1); it is safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	tools map[string]Tool
}

// NewRegistry returns a registry holding tools.
func NewRegistry(tools ...Tool) (*Registry, error) {
	r := &Registry{tools: make(map[string]Tool, len(tools))}
	for _, t := range tools {
		if err := r.Register(t); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Register adds t. A name already taken is ErrDuplicate.
func (r *Registry) Register(t Tool) error {
	if t == nil {
		return errors.New("tool: Register of nil tool")
	}
	name := t.Info().Name
	if !ValidName(name) {
		return fmt.Errorf("%w %q: use 1 to 64 letters, digits, '_' or '-'", ErrInvalidName, name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tools == nil {
		r.tools = map[string]Tool{}
	}
	if _, dup := r.tools[name]; dup {
		return fmt.Errorf("%w %q", ErrDuplicate, name)
	}
	r.tools[name] = t
	return nil
}

// Get returns the tool called name.
func (r *Registry) Get(name string) (Tool, bool) {
	r.mu.RLock()
	t, ok := r.tools[name]
	r.mu.RUnlock()
	return t, ok
}

// Unregister removes the tool called name and reports whether it was there.
func (r *Registry) Unregister(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.tools[name]
	delete(r.tools, name)
	return ok
}

// Names returns the names of all tools, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.tools))
	for n := range r.tools {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Len returns the number of tools.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.tools)
}
