package web

// Passkeys (WebAuthn, docs/security.md#passkeys): a signed-in owner enrolls one on /passkeys; a
// browser signs its owner in with one on /login. The relying party's id and origins come from
// the configuration (Config.PasskeyRPID, PasskeyOrigins); the ceremonies' state (the challenge)
// stays here, server-side, single use and short-lived (ceremonies); the credentials are in the
// passkeys table (migrations/00037_passkeys.sql). A passkey signs its owner in with the role of
// the owner's best live token: an owner whose tokens are all revoked or expired is refused.

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"
	"github.com/jackc/pgx/v5"

	"github.com/cortexq/cortexq/queue/text"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// ceremonyCookie holds the id of the browser's pending ceremony (enrolment or sign-in).
const ceremonyCookie = "cortexq_webauthn"

// ceremonyTTL is how long a ceremony's challenge may be answered.
const ceremonyTTL = 3 * time.Minute

// maxCeremonies bounds the pending ceremonies: past it, new sign-ins wait for old ones to expire
// (a flood of begun sign-ins costs a bounded memory).
const maxCeremonies = 4096

// maxPasskeyName bounds a passkey's name, in characters.
const maxPasskeyName = 100

// newPasskeys makes the relying party of cfg, or nil when passkeys are off (no RP id).
func newPasskeys(cfg Config) (*webauthn.WebAuthn, error) {
	if cfg.PasskeyRPID == "" {
		if len(cfg.PasskeyOrigins) > 0 {
			return nil, errors.New("--passkey-origin needs --passkey-rp-id")
		}
		return nil, nil
	}
	if net.ParseIP(cfg.PasskeyRPID) != nil || strings.ContainsAny(cfg.PasskeyRPID, ":/") {
		return nil, fmt.Errorf("--passkey-rp-id %q: want a domain (cortexq.example.org, or localhost), not an address or a URL", cfg.PasskeyRPID)
	}
	origins := cfg.PasskeyOrigins
	if len(origins) == 0 {
		origins = []string{"https://" + cfg.PasskeyRPID}
	}
	for _, o := range origins {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("--passkey-origin %q: want scheme://host[:port], such as https://cortexq.example.org", o)
		}
		if h := u.Hostname(); h != cfg.PasskeyRPID && !strings.HasSuffix(h, "."+cfg.PasskeyRPID) {
			return nil, fmt.Errorf("--passkey-origin %q is not on --passkey-rp-id %s or a subdomain of it", o, cfg.PasskeyRPID)
		}
	}
	timeout := webauthn.TimeoutConfig{Enforce: true, Timeout: ceremonyTTL, TimeoutUVD: ceremonyTTL}
	wa, err := webauthn.New(&webauthn.Config{RPID: cfg.PasskeyRPID, RPDisplayName: "cortexq", RPOrigins: origins,
		Timeouts: webauthn.TimeoutsConfig{Login: timeout, Registration: timeout}})
	if err != nil {
		return nil, fmt.Errorf("--passkey-rp-id %s: %w", cfg.PasskeyRPID, err)
	}
	return wa, nil
}

// passkeysOn reports whether browsers may enroll and use passkeys.
func (s *Server) passkeysOn() bool { return s.webauthn != nil && s.actionsAllowed() }

// ceremony is a begun enrolment or sign-in, waiting for the browser's answer.
type ceremony struct {
	enroll  bool   // an enrolment (else a sign-in)
	owner   string // enrolment: who enrolls; sign-in by name: who signs in ("" discoverable)
	name    string // enrolment: the passkey's name
	data    webauthn.SessionData
	expires time.Time
}

// ceremonies are the pending ceremonies by id, each taken at most once.
type ceremonies struct {
	mu sync.Mutex
	m  map[string]*ceremony
}

// put stores c and returns its id; it refuses when maxCeremonies are pending.
func (cs *ceremonies) put(c *ceremony) (string, error) {
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	id := base64.RawURLEncoding.EncodeToString(raw)
	now := time.Now()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.m == nil {
		cs.m = map[string]*ceremony{}
	}
	if len(cs.m) >= maxCeremonies {
		for k, old := range cs.m {
			if now.After(old.expires) {
				delete(cs.m, k)
			}
		}
	}
	if len(cs.m) >= maxCeremonies {
		return "", httpError{code: http.StatusServiceUnavailable, msg: "too many passkey ceremonies under way: try again in a few minutes"}
	}
	c.expires = now.Add(ceremonyTTL)
	cs.m[id] = c
	return id, nil
}

// take removes and returns the ceremony of the request's cookie, if it is of the kind asked and
// not expired. A ceremony is taken once, whatever its answer.
func (cs *ceremonies) take(r *http.Request, enroll bool) (*ceremony, error) {
	ck, err := r.Cookie(ceremonyCookie)
	if err != nil {
		return nil, forbidden("no passkey ceremony under way: start again")
	}
	cs.mu.Lock()
	c, ok := cs.m[ck.Value]
	delete(cs.m, ck.Value)
	cs.mu.Unlock()
	if !ok || c.enroll != enroll || time.Now().After(c.expires) {
		return nil, forbidden("the passkey ceremony expired or was already used: start again")
	}
	return c, nil
}

// setCeremony sets the ceremony cookie (cleared by endCeremony).
func setCeremony(w http.ResponseWriter, r *http.Request, id string) {
	http.SetCookie(w, &http.Cookie{Name: ceremonyCookie, Value: id, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: secure(r), MaxAge: int(ceremonyTTL / time.Second)})
}

func endCeremony(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: ceremonyCookie, Value: "", Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: secure(r), MaxAge: -1})
}

// passkeyUser is an owner as the WebAuthn library sees one.
type passkeyUser struct {
	owner  string
	handle []byte
	creds  []webauthn.Credential
}

func (u *passkeyUser) WebAuthnID() []byte                         { return u.handle }
func (u *passkeyUser) WebAuthnName() string                       { return u.owner }
func (u *passkeyUser) WebAuthnDisplayName() string                { return u.owner }
func (u *passkeyUser) WebAuthnCredentials() []webauthn.Credential { return u.creds }

// loadUser reads an owner's handle (made now if the owner has none yet) and passkeys.
func (s *Server) loadUser(r *http.Request, owner string) (*passkeyUser, error) {
	q := dbsqlc.New(s.cfg.Base.Pool)
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, err
	}
	handle, err := q.PasskeyOwnerHandle(r.Context(), owner, fresh)
	if err != nil {
		return nil, err
	}
	rows, err := q.PasskeysOfOwner(r.Context(), owner)
	if err != nil {
		return nil, err
	}
	u := &passkeyUser{owner: owner, handle: handle}
	for _, row := range rows {
		var c webauthn.Credential
		if err := json.Unmarshal(row.Record, &c); err != nil {
			return nil, fmt.Errorf("passkey %d: bad record: %w", row.ID, err)
		}
		u.creds = append(u.creds, c)
	}
	return u, nil
}

// ownerRole is the role a passkey signs owner in with, and the token it signs in through: the
// owner's live token of the highest role (revoking or expiring it ends the session, as for a
// token's session); the break-glass owner "admin" without one is an admin (no token) while the
// dashboard has an admin token. An owner whose tokens are all revoked or expired is refused.
func (s *Server) ownerRole(r *http.Request, owner string) (string, int64, error) {
	row, err := dbsqlc.New(s.cfg.Base.Pool).OwnerBestToken(r.Context(), owner)
	switch {
	case err == nil:
		return row.Role, row.ID, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return "", 0, err
	case owner == AdminOwner && s.cfg.AdminToken != "":
		return roleAdmin, 0, nil
	}
	return "", 0, forbidden("owner %s has no live token (revoked or expired): their passkeys sign nobody in", owner)
}

// passkeyName checks the name a passkey is enrolled under.
func passkeyName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		name = "passkey"
	}
	if err := text.CheckInput("name", name); err != nil {
		return "", badRequest("%v", err)
	}
	if len([]rune(name)) > maxPasskeyName {
		return "", badRequest("a passkey's name is at most %d characters", maxPasskeyName)
	}
	return name, nil
}

// readJSON decodes a small JSON body (at most maxFormBytes) into v.
func readJSON(w http.ResponseWriter, r *http.Request, v any) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		return badRequest("bad JSON body: %v", err)
	}
	return nil
}

// jsonFail answers a ceremony's error as JSON: {"error": message}.
func (s *Server) jsonFail(w http.ResponseWriter, r *http.Request, err error) {
	code, msg := http.StatusInternalServerError, "internal error: see the dashboard's log"
	var he httpError
	var pe *protocol.Error
	switch {
	case errors.As(err, &he):
		code, msg = he.code, he.msg
	case errors.As(err, &pe):
		code, msg = http.StatusForbidden, "passkey refused: "+pe.Details
	case errors.Is(err, pgx.ErrNoRows):
		code, msg = http.StatusNotFound, "no such passkey"
	default:
		s.logger.Error("passkey", "path", r.URL.Path, "error", err)
	}
	noteOf(r).Err = msg
	writeJSON(w, code, map[string]string{"error": msg})
}
