package tool

import (
	"encoding/json"
	"fmt"

	"github.com/agentry/agentry/internal/registry"
)

// Connector builds the tools of a connector (files, shell, SQL) from the
// configuration a spec gives it under "connectors", with baseDir (the
// spec's directory) to resolve relative paths against. A connector's
// tools exist only for the agents whose spec configures it: it is off
// until a spec turns it on.
type Connector func(config json.RawMessage, baseDir string) ([]Tool, error)

var connectors registry.Registry[Connector]

// RegisterConnector makes a connector available to specs under name. It
// panics when name is taken, as database/sql does.
func RegisterConnector(name string, c Connector) {
	if !connectors.Add(name, c) {
		panic("tool: RegisterConnector called twice for " + name)
	}
}

// OpenConnector builds the tools of the connector name from config. An
// unknown name is an error that lists the known ones.
func OpenConnector(name string, config json.RawMessage, baseDir string) ([]Tool, error) {
	c, ok := connectors.Get(name)
	if !ok {
		return nil, fmt.Errorf("unknown connector %q (known: %v)", name, connectors.Names())
	}
	return c(config, baseDir)
}
