// Package allowlist keeps the CURVE allow-list (table worker_keys): the public keys of the
// workers a replica with CURVE on lets in, each under a name, and their revocations. The
// replicas read it (Allowed); `cortexq keys` edits it.
package allowlist

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// List is the allow-list in a database.
type List struct{ pool *pgxpool.Pool }

// New returns the allow-list of the database behind pool.
func New(pool *pgxpool.Pool) *List { return &List{pool: pool} }

// WorkerKey is an entry of the CURVE allow-list (table worker_keys).
type WorkerKey struct {
	// PublicKey is the worker's CURVE public key, Z85-encoded.
	PublicKey string
	// Name is the principal the key authenticates; several keys may share one (a rotation).
	Name      string
	AddedAt   time.Time
	RevokedAt *time.Time
}

var keyNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidKeyName checks the name of a key: 1–64 letters, digits, '.', '_' or '-', starting with a
// letter or digit. It ends up in worker names (key:<name>/…), logs and metrics.
func ValidKeyName(name string) error {
	if !keyNameRE.MatchString(name) {
		return fmt.Errorf("key name %q: want 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	return nil
}

// z85Alphabet is ZeroMQ's Z85 alphabet (RFC 32).
const z85Alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"

// ValidPublicKey checks that key looks like a Z85-encoded CURVE key: 40 characters of the Z85
// alphabet.
func ValidPublicKey(key string) error {
	if len(key) != 40 || strings.IndexFunc(key, func(r rune) bool { return !strings.ContainsRune(z85Alphabet, r) }) >= 0 {
		return fmt.Errorf("public key %q: want 40 Z85 characters", key)
	}
	return nil
}

// Allowed returns the allow-list as it stands: public key → name, revoked keys left out.
func (l *List) Allowed(ctx context.Context) (map[string]string, error) {
	rows, err := dbsqlc.New(l.pool).WorkerKeysAllowed(ctx)
	if err != nil {
		return nil, fmt.Errorf("list allowed keys: %w", err)
	}
	out := make(map[string]string, len(rows))
	for _, r := range rows {
		out[r.PublicKey] = r.Name
	}
	return out, nil
}

// All lists every key on record, revoked ones included, newest first.
func (l *List) All(ctx context.Context) ([]WorkerKey, error) {
	rows, err := dbsqlc.New(l.pool).WorkerKeysAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	out := make([]WorkerKey, len(rows))
	for i, r := range rows {
		out[i] = workerKeyOf(r)
	}
	return out, nil
}

// Allow puts a public key on the allow-list under name, or renames and re-allows it.
func (l *List) Allow(ctx context.Context, publicKey, name string) (WorkerKey, error) {
	if err := ValidPublicKey(publicKey); err != nil {
		return WorkerKey{}, err
	}
	if err := ValidKeyName(name); err != nil {
		return WorkerKey{}, err
	}
	row, err := dbsqlc.New(l.pool).WorkerKeyAllow(ctx, publicKey, name)
	if err != nil {
		return WorkerKey{}, fmt.Errorf("allow key: %w", err)
	}
	return workerKeyOf(row), nil
}

// Revoke revokes the allowed key publicKey, or every allowed key named name (give one of
// the two), and returns what it revoked: nothing is queue.ErrNotFound.
func (l *List) Revoke(ctx context.Context, publicKey, name string) ([]WorkerKey, error) {
	if (publicKey == "") == (name == "") {
		return nil, errors.New("revoke keys: give a public key or a name")
	}
	var pk, nm *string
	if publicKey != "" {
		pk = &publicKey
	} else {
		nm = &name
	}
	rows, err := dbsqlc.New(l.pool).WorkerKeyRevoke(ctx, pk, nm)
	if err != nil {
		return nil, fmt.Errorf("revoke keys: %w", err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("revoke keys: no allowed key %s: %w", publicKey+name, queue.ErrNotFound)
	}
	out := make([]WorkerKey, len(rows))
	for i, r := range rows {
		out[i] = workerKeyOf(r)
	}
	return out, nil
}

func workerKeyOf(r dbsqlc.WorkerKey) WorkerKey {
	return WorkerKey{PublicKey: r.PublicKey, Name: r.Name, AddedAt: r.AddedAt, RevokedAt: r.RevokedAt}
}
