package memory

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// KeyEnv is the environment variable that holds the encryption key of
// the binary's memory.
const KeyEnv = "AGENTRY_ENCRYPTION_KEY"

// ParseKey reads an AES-256 key: 32 bytes, written as 64 hex digits or
// in base64.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if k, err := hex.DecodeString(s); err == nil && len(k) == 32 {
		return k, nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil && len(k) == 32 {
			return k, nil
		}
	}
	return nil, fmt.Errorf("the key must be 32 bytes, written as 64 hex digits or in base64 (openssl rand -hex 32); got %d characters", len(s))
}
