package lease

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

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

// KeyedWorker is the name a worker calling itself worker is recorded under when it
// authenticated with a key named key: "key:<key>/<worker>". The key part is what a CURVE
// replica vouches for; the worker part only tells apart the processes sharing a key.
func KeyedWorker(key, worker string) string { return keyPrefix(key) + worker }

func keyPrefix(key string) string { return "key:" + key + "/" }

// KeyOfWorker reports the name of the key a worker name was recorded under (KeyedWorker), or
// "" for a name without one. Key names have no '/', so the first one ends the key.
func KeyOfWorker(worker string) string {
	rest, ok := strings.CutPrefix(worker, "key:")
	if !ok {
		return ""
	}
	key, _, ok := strings.Cut(rest, "/")
	if !ok {
		return ""
	}
	return key
}

// AllowedKeys returns the allow-list as it stands: public key → name, revoked keys left out.
func (s *Store) AllowedKeys(ctx context.Context) (map[string]string, error) {
	rows, err := dbsqlc.New(s.pool).WorkerKeysAllowed(ctx)
	if err != nil {
		return nil, translate("list allowed keys", err)
	}
	out := make(map[string]string, len(rows))
	for _, r := range rows {
		out[r.PublicKey] = r.Name
	}
	return out, nil
}

// WorkerKeys lists every key on record, revoked ones included, newest first.
func (s *Store) WorkerKeys(ctx context.Context) ([]WorkerKey, error) {
	rows, err := dbsqlc.New(s.pool).WorkerKeysAll(ctx)
	if err != nil {
		return nil, translate("list keys", err)
	}
	out := make([]WorkerKey, len(rows))
	for i, r := range rows {
		out[i] = workerKeyOf(r)
	}
	return out, nil
}

// AllowKey puts a public key on the allow-list under name, or renames and re-allows it.
func (s *Store) AllowKey(ctx context.Context, publicKey, name string) (WorkerKey, error) {
	if err := ValidPublicKey(publicKey); err != nil {
		return WorkerKey{}, err
	}
	if err := ValidKeyName(name); err != nil {
		return WorkerKey{}, err
	}
	row, err := dbsqlc.New(s.pool).WorkerKeyAllow(ctx, publicKey, name)
	if err != nil {
		return WorkerKey{}, translate("allow key", err)
	}
	return workerKeyOf(row), nil
}

// RevokeKeys revokes the allowed key publicKey, or every allowed key named name (give one of
// the two), and returns what it revoked: nothing is queue.ErrNotFound.
func (s *Store) RevokeKeys(ctx context.Context, publicKey, name string) ([]WorkerKey, error) {
	if (publicKey == "") == (name == "") {
		return nil, errors.New("revoke keys: give a public key or a name")
	}
	var pk, nm *string
	if publicKey != "" {
		pk = &publicKey
	} else {
		nm = &name
	}
	rows, err := dbsqlc.New(s.pool).WorkerKeyRevoke(ctx, pk, nm)
	if err != nil {
		return nil, translate("revoke keys", err)
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

// KeyHoldsAttempt reports whether a worker of the key named key holds an attempt of task id in
// one of its dispatch rows: whether a reply authenticated with key can be anything but
// OutcomeNotHolder or OutcomeUnknown. Claim decides; this is a cheap look before the work a
// reply costs.
func (s *Store) KeyHoldsAttempt(ctx context.Context, id int64, key string) (bool, error) {
	held, err := dbsqlc.New(s.pool).DispatchHeldByKey(ctx, id, keyPrefix(key))
	if err != nil {
		return false, translate("look up the task's key holders", err)
	}
	return held, nil
}
