package tool

import (
	"encoding/json"
	"fmt"

	"github.com/agentry/agentry/internal/registry"
)

// Connector builds the tools of a connector (files, shell, SQL) from the
// configuration a spec gives it under "connectors", with baseDir (the
// spec's directory) to resolve relative paths against. When its tools
// hold something open (a database pool), close releases it; it is nil
// otherwise. The agent that opened the connector calls close from its
// own Close. A connector's tools exist only for the agents whose spec
// configures it: it is off until a spec turns it on.
type Connector func(config json.RawMessage, baseDir string) (tools []Tool, close func() error, err error)

var connectors registry.Registry[Connector]

// RegisterConnector makes a connector available to specs under name. It
// panics when name is taken, as database/sql does.
func RegisterConnector(name string, c Connector) {
	if !connectors.Add(name, c) {
		panic("tool: RegisterConnector called twice for " + name)
	}
}

// OpenConnector builds the tools of the connector name from config, and
// returns the function that releases what they hold (nil when nothing).
// An unknown name is an error that lists the known ones.
func OpenConnector(name string, config json.RawMessage, baseDir string) (tools []Tool, close func() error, err error) {
	c, ok := connectors.Get(name)
	if !ok {
		return nil, nil, fmt.Errorf("unknown connector %q (known: %v)", name, connectors.Names())
	}
	return c(config, baseDir)
}
