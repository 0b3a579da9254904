package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// AuditRecord is one decision of the policy layer: who (the run, its
// agent and user), what (the target, a tool call or a text), which rule,
// the decision and why, and when. Records form one chain: each carries
// the hash of the one before, so an edited, inserted or deleted record is
// found by Verify.
type AuditRecord struct {
	// Seq orders the chain; the store assigns it.
	Seq      int64     `json:"seq"`
	Time     time.Time `json:"time"`
	RunID    string    `json:"run_id"`
	Agent    string    `json:"agent,omitempty"`
	UserID   string    `json:"user_id,omitempty"`
	Rule     string    `json:"rule"`
	Decision string    `json:"decision"`
	Target   string    `json:"target,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	// Prev is the hash of the record before (empty for the first), Hash
	// this record's; the store computes both.
	Prev string `json:"prev"`
	Hash string `json:"hash"`
}

// Audit is the append-only audit log.
type Audit interface {
	// AppendAudit adds r at the end of the chain and returns it as
	// stored, with its sequence number and hashes.
	AppendAudit(ctx context.Context, r AuditRecord) (AuditRecord, error)
	// AuditLog returns the records of runID (every record when runID is
	// ""), in order.
	AuditLog(ctx context.Context, runID string) ([]AuditRecord, error)
	// VerifyAudit checks the whole chain against its head (the hash of
	// the last record, kept apart), so that a record removed from the end
	// is found too. The error names the first broken record.
	VerifyAudit(ctx context.Context) error
}

// HashAudit is the hash of r given the hash of the record before it: the
// SHA-256 of prev and of r's fields (not Seq, Prev or Hash).
func HashAudit(prev string, r *AuditRecord) string {
	fields, _ := json.Marshal([]any{r.Time.UTC().Format(time.RFC3339Nano), r.RunID, r.Agent, r.UserID, r.Rule,
		r.Decision, r.Target, r.Reason})
	h := sha256.New()
	h.Write([]byte(prev))
	h.Write([]byte{0})
	h.Write(fields)
	return hex.EncodeToString(h.Sum(nil))
}

// VerifyChain checks a whole chain (AuditLog with runID ""): each
// record's hash, that each names the one before it, and that the last is
// head (the hash the store keeps apart; "" for an empty chain). The error
// names the first broken record. A chain whose every hash was recomputed
// after an edit passes: the chain finds edits made without agentry, not
// by someone who rewrites it whole.
func VerifyChain(records []AuditRecord, head string) error {
	prev := ""
	for i := range records {
		r := &records[i]
		switch {
		case r.Prev != prev:
			return fmt.Errorf("%w at record %d: it follows a record whose hash is not %.12s… (one before it was removed or changed)",
				ErrAuditBroken, r.Seq, r.Prev)
		case HashAudit(prev, r) != r.Hash:
			return fmt.Errorf("%w at record %d: its contents do not match its hash (it was changed)", ErrAuditBroken, r.Seq)
		}
		prev = r.Hash
	}
	if prev != head {
		return fmt.Errorf("%w after the last record (%d records): the chain ends at %.12s…, its head says %.12s… (records were removed from the end)",
			ErrAuditBroken, len(records), prev, head)
	}
	return nil
}
