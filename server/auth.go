package server

import (
	"context"
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
// SHA-256 (hex), never the key itself, the role it gives, and a name: the
// user the key acts for, who owns the runs it creates and whom the audit
// log records.
type Key struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
	Role   Role   `json:"role"`
	// AllUsers lets the key reach every user's runs, not only its own:
	// a viewer then reads them all, a runner also aborts them. Deciding
	// another user's approvals still needs the role admin.
	AllUsers bool `json:"all_users,omitempty"`
}

// keySums are the keys' hashes, decoded; a key that is not whole is an
// error naming it.
func keySums(keys []Key) ([][]byte, error) {
	var sums [][]byte
	for _, k := range keys {
		sum, err := hex.DecodeString(k.SHA256)
		switch {
		case err != nil || len(sum) != sha256.Size:
			return nil, fmt.Errorf("server: key %q: sha256 is not 64 hex digits", k.Name)
		case k.Role.rank() == 0:
			return nil, fmt.Errorf("server: key %q: role %q is not viewer, runner or admin", k.Name, k.Role)
		case k.Name == "":
			return nil, errors.New("server: a key has no name (the user its runs act for)")
		}
		sums = append(sums, sum)
	}
	return sums, nil
}

// HashKey is the hex SHA-256 a Key keeps of a bearer key.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// LoadKeys reads a keys file: a JSON list of {"name", "sha256", "role"}
// (and "all_users": true for a key that reaches every user's runs),
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

// caller is who makes a request, as it is decided once, when the
// request is authenticated: the user it acts for (the key's name; "" on
// a server without keys, the local operator), its role, and whether it
// reaches every user's runs (an admin, a key with all_users, and every
// caller of a server without keys).
type caller struct {
	user string
	role Role
	all  bool
}

type callerKey struct{}

// callerOf is the caller of a request's context. A context with none
// may do nothing and reaches only the local operator's things: what runs
// without a request (a resume at start) decides nothing through it.
func callerOf(ctx context.Context) *caller {
	if c, ok := ctx.Value(callerKey{}).(*caller); ok {
		return c
	}
	return &caller{}
}

// at says whether the caller's role is at least min.
func (c *caller) at(min Role) bool { return c.role.rank() >= min.rank() }

// sees says whether the caller reaches what owner owns: its runs, their
// events and audit records, its evaluations and A2A tasks. What it does
// not reach answers as what does not exist.
func (c *caller) sees(owner string) bool { return c.all || owner == c.user }

// decides says whether the caller may approve or deny the calls a run of
// owner's waits for (and so resume it): the owner's own runner, or an
// admin. A key that reaches every user's runs does not decide for them.
func (c *caller) decides(owner string) bool {
	return c.role == RoleAdmin || c.at(RoleRunner) && owner == c.user
}

// principal is the caller as the runs it starts see it (the policy's
// access rules read its user and roles).
func (c *caller) principal() policy.Principal {
	if c.role == "" {
		return policy.Principal{UserID: c.user} // no request's caller: no roles
	}
	return policy.Principal{UserID: c.user, Roles: []string{string(c.role)}}
}

// authError is why a request is not authenticated, with the status to
// answer.
type authError struct {
	status int
	msg    string
}

// authenticate is the caller of r: the key's user and role, or the local
// operator (an admin) when the server has no keys. The Authorization
// header must be given once; its scheme is Bearer in any case.
func (s *Server) authenticate(r *http.Request) (*caller, *authError) {
	if len(s.cfg.Keys) == 0 {
		return &caller{role: RoleAdmin, all: true}, nil
	}
	vals := r.Header.Values("Authorization")
	if len(vals) > 1 {
		return nil, &authError{http.StatusBadRequest, fmt.Sprintf("the request has %d Authorization headers: give one", len(vals))}
	}
	token, ok := bearerToken(r.Header.Get("Authorization"))
	if !ok {
		return nil, &authError{http.StatusUnauthorized, "a bearer key is required (Authorization: Bearer KEY)"}
	}
	sum := sha256.Sum256([]byte(token))
	for i, k := range s.cfg.Keys {
		if subtle.ConstantTimeCompare(sum[:], s.sums[i]) == 1 {
			return &caller{user: k.Name, role: k.Role, all: k.AllUsers || k.Role == RoleAdmin}, nil
		}
	}
	return nil, &authError{http.StatusUnauthorized, "the bearer key is not known"}
}

// bearerToken is the token of an Authorization header of the Bearer scheme,
// whose name is case-insensitive (RFC 9110, 11.1).
func bearerToken(h string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
	token = strings.TrimSpace(token)
	return token, ok && strings.EqualFold(scheme, "Bearer") && token != ""
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

// whoami answers who the caller is: the key's name ("" without keys),
// its role, and whether it reaches every user's runs, so that a client
// shows only what the caller may do.
func (s *Server) whoami(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r.Context())
	writeJSON(w, http.StatusOK, map[string]any{"name": c.user, "role": c.role, "all_users": c.all, "keys": len(s.cfg.Keys) > 0})
}
