package audit

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// TokenPrefix starts every token, so a leaked one is recognisable (by a secret scanner, say).
const TokenPrefix = "cqt_"

// Roles are the roles a token carries (docs/security.md#roles).
var Roles = map[string]bool{"viewer": true, "operator": true, "admin": true}

// OwnerName is what an owner's name may be.
var OwnerName = regexp.MustCompile(`^[A-Za-z0-9._@-]{1,64}$`)

// TokenDigest is what the database keeps of a token: its SHA-256.
func TokenDigest(token string) []byte {
	d := sha256.Sum256([]byte(token))
	return d[:]
}

// Minted is a token just made: shown once, never stored.
type Minted struct {
	ID        int64
	Token     string
	CreatedAt time.Time
	ExpiresAt *time.Time
}

// MintToken makes a token for owner with role (256 random bits), expiring after expires by the
// database's clock (0: never), and stores its digest only.
func MintToken(ctx context.Context, pool *pgxpool.Pool, owner, role string, expires time.Duration) (Minted, error) {
	if !OwnerName.MatchString(owner) {
		return Minted{}, fmt.Errorf("owner %q: want 1-64 letters, digits, '.', '_', '@' or '-'", owner)
	}
	if !Roles[role] {
		return Minted{}, fmt.Errorf("role %q: want viewer, operator or admin", role)
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return Minted{}, err
	}
	m := Minted{Token: TokenPrefix + base64.RawURLEncoding.EncodeToString(secret)}
	if expires > 0 {
		var now time.Time
		if err := pool.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
			return Minted{}, err
		}
		t := now.Add(expires)
		m.ExpiresAt = &t
	}
	row, err := dbsqlc.New(pool).TokenInsert(ctx, owner, role, TokenDigest(m.Token), m.ExpiresAt)
	if err != nil {
		return Minted{}, fmt.Errorf("store the token: %w", err)
	}
	m.ID, m.CreatedAt = row.ID, row.CreatedAt
	return m, nil
}

// RevokeTokens revokes the token id, or every token of owner (give one), and ends their
// sessions at once, in one transaction; revoking by owner ends every session of the owner
// (passkeys' too). It returns the tokens revoked and the sessions ended.
func RevokeTokens(ctx context.Context, pool *pgxpool.Pool, id *int64, owner *string) (tokens, sessions int64, err error) {
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		if tokens, err = q.TokenRevoke(ctx, id, owner); err != nil {
			return err
		}
		if sessions, err = q.SessionEndRevokedTokens(ctx); err != nil || owner == nil {
			return err
		}
		more, err := q.SessionRevoke(ctx, "owner's tokens revoked", nil, owner, nil)
		sessions += more
		return err
	})
	return tokens, sessions, err
}
