package sqlstore

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/agentry/agentry/store"
)

// PutBlob keeps data under key unless the key is kept (store.Blobs).
func (s *DB) PutBlob(ctx context.Context, key string, data []byte) error {
	if key == "" {
		return fmt.Errorf("store (%s): put a blob: empty key", s.d.Name)
	}
	// A key kept already keeps its data, and is kept as new: a later
	// run's use of it is what pruning must not cut.
	if _, err := s.exec(ctx, s.q(`INSERT INTO agentry_blobs (key, data, created_at) VALUES (?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET created_at = excluded.created_at`),
		key, base64.StdEncoding.EncodeToString(data), s.now().UnixMicro()); err != nil {
		return fmt.Errorf("store (%s): put blob %s: %w", s.d.Name, key, err)
	}
	return nil
}

// Blob returns the data kept under key (store.Blobs).
func (s *DB) Blob(ctx context.Context, key string) ([]byte, error) {
	var text string
	err := s.db.QueryRowContext(ctx, s.q(`SELECT data FROM agentry_blobs WHERE key = ?`), key).Scan(&text)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: blob %s", store.ErrNotFound, key)
	}
	if err != nil {
		return nil, fmt.Errorf("store (%s): blob %s: %w", s.d.Name, key, err)
	}
	return base64.StdEncoding.DecodeString(text)
}

// Pin records digest for name@version unless one is, and returns the one
// recorded (store.Pins).
func (s *DB) Pin(ctx context.Context, name, version, digest string) (string, error) {
	if _, err := s.exec(ctx, s.q(`INSERT INTO agentry_pins (name, version, digest, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (name, version) DO NOTHING`), name, version, digest, s.now().UnixMicro()); err != nil {
		return "", fmt.Errorf("store (%s): pin %s@%s: %w", s.d.Name, name, version, err)
	}
	var pinned string
	if err := s.db.QueryRowContext(ctx, s.q(`SELECT digest FROM agentry_pins WHERE name = ? AND version = ?`), name, version).Scan(&pinned); err != nil {
		return "", fmt.Errorf("store (%s): pin %s@%s: %w", s.d.Name, name, version, err)
	}
	return pinned, nil
}
