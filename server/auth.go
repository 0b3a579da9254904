package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/agentry/agentry/internal/strictjson"
	"github.com/agentry/agentry/policy"
)

// Role is what a caller may do. Each role may do what the ones before it
// may.
type Role string

// The roles.
const (
	// RoleViewer reads runs, their events and the agents.
	RoleViewer Role = "viewer"
	// RoleRunner also creates, resumes and aborts runs of named agents.
	RoleRunner Role = "runner"
	// RoleAdmin also runs inline specs.
	RoleAdmin Role = "admin"
)

// rank orders the roles.
func (r Role) rank() int {
	switch r {
	case RoleViewer:
		return 1
	case RoleRunner:
		return 2
	case RoleAdmin:
		return 3
	}
	return 0
}

// Key is a bearer key a caller presents, as the server keeps it: its
// SHA-256 (hex), never the key itself, the role it gives, and a name the
// audit log records as the caller's user.
type Key struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
	Role   Role   `json:"role"`
}

// HashKey is the hex SHA-256 a Key keeps of a bearer key.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// LoadKeys reads a keys file: a JSON list of {"name", "sha256", "role"},
// the hashes made with HashKey (agentry serve hash-key). Every problem is
// named.
func LoadKeys(path string) ([]Key, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("server: keys: %w", err)
	}
	var keys []Key
	if err := strictjson.Decode(data, &keys); err != nil {
		return nil, fmt.Errorf("server: keys file %s: %v", path, err)
	}
	var probs []string
	for i, k := range keys {
		if _, err := hex.DecodeString(k.SHA256); err != nil || len(k.SHA256) != 64 {
			probs = append(probs, fmt.Sprintf("[%d] %q: sha256 is not 64 hex digits", i, k.Name))
		}
		if k.Role.rank() == 0 {
			probs = append(probs, fmt.Sprintf("[%d] %q: role %q is not viewer, runner or admin", i, k.Name, k.Role))
		}
		if k.Name == "" {
			probs = append(probs, fmt.Sprintf("[%d]: name is empty", i))
		}
	}
	if len(keys) == 0 {
		probs = append(probs, "no keys")
	}
	if len(probs) > 0 {
		return nil, fmt.Errorf("server: keys file %s: %s", path, strings.Join(probs, "; "))
	}
	return keys, nil
}

// authenticate is the caller of r as a principal: the key's name and
// role, or an admin when the server has no keys.
func (s *Server) authenticate(r *http.Request) (*policy.Principal, int, error) {
	if len(s.cfg.Keys) == 0 {
		return &policy.Principal{Roles: []string{string(RoleAdmin)}}, 0, nil
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return nil, http.StatusUnauthorized, errors.New("a bearer key is required (Authorization: Bearer KEY)")
	}
	sum := sha256.Sum256([]byte(token))
	for i, k := range s.cfg.Keys {
		if subtle.ConstantTimeCompare(sum[:], s.sums[i]) == 1 {
			return &policy.Principal{UserID: k.Name, Roles: []string{string(k.Role)}}, 0, nil
		}
	}
	return nil, http.StatusUnauthorized, errors.New("the bearer key is not known")
}

// sameOrigin refuses, on a server without keys (where every caller is
// an admin), what a web page the user visits could send: a request for
// another host name (DNS rebinding: a name of the attacker's that
// resolves to loopback) or from another origin (a form or a fetch of
// another site, or of another port of this machine). A browser cannot
// forge either header; a bearer key, which a browser never sends by
// itself, makes both checks moot.
func (s *Server) sameOrigin(r *http.Request) error {
	if len(s.cfg.Keys) > 0 {
		return nil
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if ip := net.ParseIP(strings.Trim(host, "[]")); !(host == "localhost" || ip != nil && ip.IsLoopback()) {
		return fmt.Errorf("host %q: a server without keys answers loopback names only (localhost, 127.0.0.1, [::1])", r.Host)
	}
	if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host && o != "https://"+r.Host {
		return fmt.Errorf("origin %q: a server without keys answers its own pages only", o)
	}
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return errors.New("a cross-site request: a server without keys answers its own pages only")
	}
	return nil
}

// allows says whether p holds a role at least min.
func allows(p *policy.Principal, min Role) bool {
	for _, r := range p.Roles {
		if Role(r).rank() >= min.rank() {
			return true
		}
	}
	return false
}

// roleOf is p's highest role.
func roleOf(p *policy.Principal) Role {
	best := Role("")
	for _, r := range p.Roles {
		if Role(r).rank() > best.rank() {
			best = Role(r)
		}
	}
	return best
}

// whoami answers who the caller is: the key's name ("" without keys)
// and its role, so that a client shows only what the role may do.
func (s *Server) whoami(w http.ResponseWriter, r *http.Request) {
	p := policy.PrincipalFrom(r.Context())
	writeJSON(w, http.StatusOK, map[string]any{"name": p.UserID, "role": roleOf(p), "keys": len(s.cfg.Keys) > 0})
}
