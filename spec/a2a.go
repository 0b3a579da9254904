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

// A2AAgent is what an "a2a:URL" tools entry needs beyond its URL: the
// headers sent with each request to the agent (its credentials), whose
// values take ${env:NAME} from the environment.
type A2AAgent struct {
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
}

// A2AAgent returns the spec's a2a_agents entry for url, or nil.
func (s *Spec) A2AAgent(url string) *A2AAgent {
	for i := range s.A2AAgents {
		if s.A2AAgents[i].URL == url {
			return &s.A2AAgents[i]
		}
	}
	return nil
}

func (s *Spec) checkA2A(c *checker) {
	for i, a := range s.A2AAgents {
		at := fmt.Sprintf("a2a_agents[%d]", i)
		if err := CheckA2AURL(a.URL); err != nil {
			c.bad("%s: url: %v", at, err)
		} else if s.A2AAgent(a.URL) != &s.A2AAgents[i] {
			c.bad("%s: url %q is given twice", at, a.URL)
		}
		for k, v := range a.Headers {
			if _, err := ExpandEnv(v, func(string) (string, bool) { return "", true }); err != nil {
				c.bad("%s: headers.%s: %v", at, k, err)
			}
		}
	}
}
