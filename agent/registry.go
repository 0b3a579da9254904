package agent

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/agentry/agentry/spec"
)

// WithRegistry makes the agent (and the agents it builds) find its
// sub-agents ("agent:NAME") and handoff targets in r first, then in its
// agents directory: an agent built in Go serves as one, the same
// instance, not closed by the agents that use it.
func WithRegistry(r *Registry) Option { return func(o *options) { o.peers = r } }

// lookup is the registered agent ref names, if the options' registry
// (the default one when none was given) holds it.
func (o *options) lookup(ref string) *Agent {
	peers := o.peers
	if peers == nil {
		peers = defaultRegistry
	}
	a, err := peers.Get(ref)
	if err != nil {
		return nil
	}
	return a
}

var defaultRegistry = NewRegistry()

// DefaultRegistry is the process's registry (the beans seed's "Registry
// is singleton per app"), as http.DefaultServeMux is for http.Handle: the
// agents registered in it are the sub-agents ("agent:NAME"), handoff
// targets and pipeline stages of every agent and pipeline given no
// registry of their own. A test, or a host of several tenants, gives
// its own with WithRegistry (pipeline.WithRegistry) instead.
func DefaultRegistry() *Registry { return defaultRegistry }

// Registry holds agents by name and version, for a program that keeps
// several: it finds "NAME" (the newest version) and "NAME@VERSION" in
// constant time, and agents given WithRegistry resolve their sub-agents
// ("agent:NAME") and handoffs in it before their agents directory, as a
// pipeline does its stages. It is safe for concurrent use. A Registry
// does not own its agents: closing them is the caller's.
type Registry struct {
	mu     sync.RWMutex
	byName map[string]*versions
}

// versions are one name's agents, and the newest of them.
type versions struct {
	byVersion map[string]*Agent
	newest    *Agent
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{byName: map[string]*versions{}} }

// Register adds agents. An agent whose name and version are taken is
// refused (ErrRegistered) and the ones before it stay registered.
func (r *Registry) Register(agents ...*Agent) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range agents {
		if a == nil {
			return errors.New("agent: Register of a nil agent")
		}
		name, version := a.spec.AgentName, a.spec.Version
		v := r.byName[name]
		if v == nil {
			v = &versions{byVersion: map[string]*Agent{}}
			r.byName[name] = v
		}
		if _, taken := v.byVersion[version]; taken {
			return fmt.Errorf("%w: %s@%s", ErrRegistered, name, version)
		}
		v.byVersion[version] = a
		if v.newest == nil || spec.CompareVersions(version, v.newest.spec.Version) > 0 {
			v.newest = a
		}
	}
	return nil
}

// Get returns the agent ref names: "NAME" is its newest version,
// "NAME@VERSION" that version. An agent the registry lacks is
// ErrNotRegistered, naming the versions it has.
func (r *Registry) Get(ref string) (*Agent, error) {
	name, version := spec.ParseRef(ref)
	r.mu.RLock()
	defer r.mu.RUnlock()
	v := r.byName[name]
	if v == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotRegistered, ref)
	}
	if version == "" {
		return v.newest, nil
	}
	if a := v.byVersion[version]; a != nil {
		return a, nil
	}
	return nil, fmt.Errorf("%w: %s (registered: %s)", ErrNotRegistered, ref, strings.Join(v.versionList(), ", "))
}

// Unregister removes the agent ref names ("NAME@VERSION", or every
// version of "NAME") and reports whether there was one.
func (r *Registry) Unregister(ref string) bool {
	name, version := spec.ParseRef(ref)
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.byName[name]
	if v == nil {
		return false
	}
	if version == "" {
		delete(r.byName, name)
		return true
	}
	if _, ok := v.byVersion[version]; !ok {
		return false
	}
	delete(v.byVersion, version)
	if len(v.byVersion) == 0 {
		delete(r.byName, name)
		return true
	}
	v.newest = nil
	for ver, a := range v.byVersion {
		if v.newest == nil || spec.CompareVersions(ver, v.newest.spec.Version) > 0 {
			v.newest = a
		}
	}
	return true
}

// Agents returns every registered agent, by name, then oldest version
// first.
func (r *Registry) Agents() []*Agent {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []*Agent
	for _, name := range slices.Sorted(maps.Keys(r.byName)) {
		v := r.byName[name]
		for _, ver := range v.versionList() {
			out = append(out, v.byVersion[ver])
		}
	}
	return out
}

// Close closes every registered agent, for a registry that owns them
// (LoadRegistry's).
func (r *Registry) Close() error {
	var errs []error
	for _, a := range r.Agents() {
		errs = append(errs, a.Close())
	}
	return errors.Join(errs...)
}

func (v *versions) versionList() []string {
	out := make([]string, 0, len(v.byVersion))
	for ver := range v.byVersion {
		out = append(out, ver)
	}
	slices.SortFunc(out, spec.CompareVersions)
	return out
}

// LoadRegistry builds every version of every agent in the agents
// directory dir into a new registry, each with opts and the registry
// itself (WithRegistry), so that they find each other. A spec that does
// not build is an error naming it; what was built is closed then.
func LoadRegistry(dir spec.Dir, opts ...Option) (*Registry, error) {
	names, err := dir.Names()
	if err != nil {
		return nil, err
	}
	r := NewRegistry()
	var problems []string
	refused := false
	for _, name := range names {
		vers, err := dir.Versions(name)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		for _, ver := range vers {
			a, err := FromDir(dir.Path, name+"@"+ver, append(slices.Clip(opts), WithRegistry(r))...)
			if err != nil {
				refused = refused || errors.Is(err, ErrPolicyViolation)
				problems = append(problems, strings.TrimPrefix(err.Error(), ErrConfig.Error()+": ")) // it names the agent
				continue
			}
			if err := r.Register(a); err != nil {
				problems = append(problems, fmt.Sprintf("%s@%s: %v", name, ver, err))
			}
		}
	}
	if len(problems) > 0 {
		r.Close()
		if refused { // CreatedBy refused one: errors.Is finds it
			return nil, fmt.Errorf("%w (%w): %s", ErrConfig, ErrPolicyViolation, strings.Join(problems, "; "))
		}
		return nil, fmt.Errorf("%w: %s", ErrConfig, strings.Join(problems, "; "))
	}
	return r, nil
}
