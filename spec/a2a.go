package spec

import (
	"fmt"
	"net/url"
)

// CheckA2AURL says what is wrong with the URL of an "a2a:URL" tools
// entry (a remote A2A agent's base URL, or its card's): it must be an
// absolute http or https URL with a host.
func CheckA2AURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Errorf("%q is not a URL: %v", raw, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%q: an A2A agent is reached over http or https", raw)
	case u.Host == "":
		return fmt.Errorf("%q has no host", raw)
	}
	return nil
}
