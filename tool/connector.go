package tool

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"
)

// Connector builds the tools of a connector (files, shell, SQL) from the
// configuration a spec gives it under "connectors", with baseDir (the
// spec's directory) to resolve relative paths against. A connector's
// tools exist only for the agents whose spec configures it: it is off
// until a spec turns it on.
type Connector func(config json.RawMessage, baseDir string) ([]Tool, error)

var (
	connectorsMu sync.RWMutex
	connectors   = map[string]Connector{}
)

// RegisterConnector makes a connector available to specs under name. It
// panics when name is taken, as database/sql does.
func RegisterConnector(name string, c Connector) {
	connectorsMu.Lock()
	defer connectorsMu.Unlock()
	if _, dup := connectors[name]; dup {
		panic("tool: RegisterConnector called twice for " + name)
	}
	connectors[name] = c
}

// OpenConnector builds the tools of the connector name from config. An
// unknown name is an error that lists the known ones.
func OpenConnector(name string, config json.RawMessage, baseDir string) ([]Tool, error) {
	connectorsMu.RLock()
	c, ok := connectors[name]
	known := make([]string, 0, len(connectors))
	for n := range connectors {
		known = append(known, n)
	}
	connectorsMu.RUnlock()
	if !ok {
		sort.Strings(known)
		return nil, fmt.Errorf("unknown connector %q (known: %v)", name, known)
	}
	return c(config, baseDir)
}
