package web

// The passkey endpoints: enrolment (begin, finish) for a signed-in browser, sign-in (begin,
// finish), the /passkeys page and deletion.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"
	"github.com/jackc/pgx/v5"

	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// enrollBegin answers the options of a new passkey for the signed-in owner, named by the body's
// {"name": ...}.
func (s *Server) enrollBegin(w http.ResponseWriter, r *http.Request) {
	p, err := s.jsonSession(r)
	if err != nil {
		s.jsonFail(w, r, err)
		return
	}
	var body struct {
		Name string `json:"name"`
	}
	if err := readJSON(w, r, &body); err != nil {
		s.jsonFail(w, r, err)
		return
	}
	name, err := passkeyName(body.Name)
	if err != nil {
		s.jsonFail(w, r, err)
		return
	}
	u, err := s.loadUser(r, p.Owner)
	if err != nil {
		s.jsonFail(w, r, err)
		return
	}
	creation, data, err := s.webauthn.BeginRegistration(u,
		webauthn.WithResidentKeyRequirement(protocol.ResidentKeyRequirementRequired),
		webauthn.WithExclusions(webauthn.Credentials(u.creds).CredentialDescriptors()),
		webauthn.WithExtensions(webauthn.WithExtensionCredProps()))
	if err != nil {
		s.jsonFail(w, r, err)
		return
	}
	id, err := s.ceremonies.put(&ceremony{enroll: true, owner: p.Owner, name: name, data: *data})
	if err != nil {
		s.jsonFail(w, r, err)
		return
	}
	setCeremony(w, r, id)
	writeJSON(w, http.StatusOK, creation)
}

// enrollFinish checks the browser's new credential against its ceremony and stores it.
func (s *Server) enrollFinish(w http.ResponseWriter, r *http.Request) {
	p, err := s.jsonSession(r)
	if err != nil {
		s.jsonFail(w, r, err)
		return
	}
	c, err := s.ceremonies.take(r, true)
	endCeremony(w, r)
	if err == nil && c.owner != p.Owner {
		err = forbidden("the passkey ceremony was begun by another owner: start again")
	}
	if err != nil {
		s.jsonFail(w, r, err)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	u, err := s.loadUser(r, p.Owner)
	var cred *webauthn.Credential
	if err == nil {
		cred, err = s.webauthn.FinishRegistration(u, c.data, r)
	}
	var id int64
	if err == nil {
		id, err = s.storePasskey(r, p.Owner, c.name, cred)
	}
	noteOf(r).Target = "passkey " + c.name + " of " + p.Owner
	if err != nil {
		s.jsonFail(w, r, err)
		return
	}
	s.logger.Info("passkey enrolled", "owner", p.Owner, "name", c.name, "id", id)
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "name": c.name})
}

func (s *Server) storePasskey(r *http.Request, owner, name string, cred *webauthn.Credential) (int64, error) {
	record, err := json.Marshal(cred)
	if err != nil {
		return 0, err
	}
	transports := make([]string, 0, len(cred.Transport))
	for _, t := range cred.Transport {
		transports = append(transports, string(t))
	}
	id, err := dbsqlc.New(s.cfg.Base.Pool).PasskeyInsert(r.Context(), dbsqlc.PasskeyInsertParams{Owner: owner,
		CredentialID: cred.ID, PublicKey: cred.PublicKey, SignCount: int64(cred.Authenticator.SignCount),
		Transports: transports, Aaguid: cred.Authenticator.AAGUID, Name: name, Record: record})
	if err != nil && strings.Contains(err.Error(), "passkeys_credential_id_key") {
		return 0, forbidden("this passkey is enrolled already")
	}
	return id, err
}

// loginBegin answers the options of a sign-in: for the owner the body names ({"owner": ...}),
// or, without one, for whichever passkey the authenticator holds (discoverable).
func (s *Server) loginBegin(w http.ResponseWriter, r *http.Request) {
	s.claimActor(r)
	if !s.passkeysOn() {
		s.jsonFail(w, r, forbidden("passkeys are off: sign in with a token"))
		return
	}
	if !sameOrigin(r) {
		s.jsonFail(w, r, forbidden("cross-origin request refused"))
		return
	}
	var body struct {
		Owner string `json:"owner"`
	}
	if err := readJSON(w, r, &body); err != nil {
		s.jsonFail(w, r, err)
		return
	}
	c := &ceremony{owner: strings.TrimSpace(body.Owner)}
	if c.owner != "" {
		noteOf(r).Actor = c.owner
	}
	var assertion *protocol.CredentialAssertion
	var data *webauthn.SessionData
	var err error
	if c.owner == "" {
		assertion, data, err = s.webauthn.BeginDiscoverableLogin(webauthn.WithUserVerification(protocol.VerificationPreferred))
	} else {
		// An owner without passkeys gets options all the same (no credential allowed, none
		// answers), so that the answer does not tell who has one.
		var u *passkeyUser
		if u, err = s.userIfAny(r, c.owner); err == nil {
			assertion, data, err = s.webauthn.BeginLogin(u, webauthn.WithUserVerification(protocol.VerificationPreferred))
		}
	}
	if err != nil {
		s.jsonFail(w, r, err)
		return
	}
	c.data = *data
	id, err := s.ceremonies.put(c)
	if err != nil {
		s.jsonFail(w, r, err)
		return
	}
	setCeremony(w, r, id)
	writeJSON(w, http.StatusOK, assertion)
}

// userIfAny reads an owner's passkeys without making a handle for an owner who has none: such
// an owner gets a random handle of the moment, which no credential matches.
func (s *Server) userIfAny(r *http.Request, owner string) (*passkeyUser, error) {
	rows, err := dbsqlc.New(s.cfg.Base.Pool).PasskeysOfOwner(r.Context(), owner)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return &passkeyUser{owner: owner, handle: []byte(strconv.FormatInt(time.Now().UnixNano(), 36)),
			creds: []webauthn.Credential{{ID: bytes.Repeat([]byte{0}, 16)}}}, nil
	}
	return s.loadUser(r, owner)
}

// loginFinish checks a sign-in's assertion against its ceremony and signs the owner in. Every
// refusal is audited (action "sign-in", outcome refused), and counts against the address's
// sign-in limit as a wrong token does.
func (s *Server) loginFinish(w http.ResponseWriter, r *http.Request) {
	s.claimActor(r)
	if !s.passkeysOn() {
		s.jsonFail(w, r, forbidden("passkeys are off: sign in with a token"))
		return
	}
	if !sameOrigin(r) {
		s.jsonFail(w, r, forbidden("cross-origin request refused"))
		return
	}
	// Limited per address as sign-ins with a token are; not per owner: a passkey cannot be
	// guessed, and it is the way in for an owner whose name others lock out with wrong tokens.
	addr := clientAddr(r)
	if own, _ := s.signIn.take(addr, ""); own > 0 {
		w.Header().Set("Retry-After", retryAfter(own))
		s.jsonFail(w, r, httpError{code: http.StatusTooManyRequests, msg: fmt.Sprintf("too many failed sign-ins: try again in %s", own.Round(time.Second))})
		return
	}
	n := noteOf(r)
	n.Target = "passkey"
	owner, err := s.checkAssertion(w, r)
	if owner != "" {
		n.Actor = owner
	}
	role, tokenID := "", int64(0)
	if err == nil {
		role, tokenID, err = s.ownerRole(r, owner)
	}
	if err == nil {
		err = s.startSession(w, r, owner, role, tokenID)
	}
	if err != nil {
		s.logger.Warn("web sign-in refused: passkey", "owner", owner, "remote", r.RemoteAddr, "error", err)
		s.jsonFail(w, r, err)
		return
	}
	s.signIn.refund(addr, "", true)
	s.logger.Info("web sign-in: passkey", "owner", owner, "role", role)
	writeJSON(w, http.StatusOK, map[string]string{"owner": owner, "role": role, "redirect": "/"})
}

// checkAssertion takes the request's sign-in ceremony and checks the assertion in its body. It
// returns the owner it proves (or the one it claims, on a refusal that knows it), and records
// the passkey's use.
func (s *Server) checkAssertion(w http.ResponseWriter, r *http.Request) (string, error) {
	c, err := s.ceremonies.take(r, false)
	endCeremony(w, r)
	if err != nil {
		return "", err
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	parsed, err := protocol.ParseCredentialRequestResponse(r)
	if err != nil {
		return c.owner, err
	}
	var cred *webauthn.Credential
	owner := c.owner
	if owner == "" {
		var u webauthn.User
		u, cred, err = s.webauthn.ValidatePasskeyLogin(func(_, handle []byte) (webauthn.User, error) {
			o, err := dbsqlc.New(s.cfg.Base.Pool).PasskeyOwnerByHandle(r.Context(), handle)
			if err != nil {
				return nil, fmt.Errorf("no owner has this passkey: %w", err)
			}
			owner = o
			return s.loadUser(r, o)
		}, c.data, parsed)
		if err == nil {
			owner = u.WebAuthnName()
		}
	} else {
		var u *passkeyUser
		if u, err = s.userIfAny(r, owner); err == nil {
			cred, err = s.webauthn.ValidateLogin(u, c.data, parsed)
		}
	}
	if err != nil {
		return owner, err
	}
	if cred.Authenticator.CloneWarning {
		return owner, forbidden("this passkey's signature counter went back: it may have been copied; delete it and enroll a new one")
	}
	record, err := json.Marshal(cred)
	if err != nil {
		return owner, err
	}
	_, err = dbsqlc.New(s.cfg.Base.Pool).PasskeyUsed(r.Context(), int64(cred.Authenticator.SignCount), record, cred.ID, owner)
	return owner, err
}

// passkeyRow is a passkey as the /passkeys page lists it.
type passkeyRow struct {
	ID         int64
	Owner      string
	Name       string
	Transports string
	AAGUID     string
	SignCount  int64
	Created    time.Time
	LastUsed   *time.Time
}

// passkeysPage lists the signed-in owner's passkeys (an admin's: everyone's) and enrolls new ones.
func (s *Server) passkeysPage(r *http.Request) (view, error) {
	if !s.passkeysOn() {
		return view{}, forbidden("passkeys are off: start the dashboard with --passkey-rp-id (docs/security.md#passkeys)")
	}
	p, _, ok := s.passkeySession(r)
	if !ok {
		return view{}, forbidden("sign in first (/login)")
	}
	var only *string
	if p.Role != roleAdmin {
		only = &p.Owner
	}
	rows, err := dbsqlc.New(s.cfg.Base.Pool).PasskeyList(r.Context(), only)
	if err != nil {
		return view{}, err
	}
	out := make([]passkeyRow, 0, len(rows))
	for _, k := range rows {
		out = append(out, passkeyRow{ID: k.ID, Owner: k.Owner, Name: k.Name, Transports: strings.Join(k.Transports, ", "),
			AAGUID: fmt.Sprintf("%x", k.Aaguid), SignCount: k.SignCount, Created: k.CreatedAt, LastUsed: k.LastUsedAt})
	}
	return view{Page: "passkeys", Title: "Passkeys", Data: struct {
		Owner, Role string
		Keys        []passkeyRow
	}{p.Owner, p.Role, out}}, nil
}

// deletePasskey deletes a passkey of the signed-in owner's (an admin: of anyone's).
func (s *Server) deletePasskey(r *http.Request) (string, error) {
	p, _, ok := s.passkeySession(r)
	if !ok || !s.passkeysOn() {
		return "", forbidden("passkeys are off (--passkey-rp-id), or sign in first (/login)")
	}
	id, err := strconv.ParseInt(r.PostForm.Get("id"), 10, 64)
	if err != nil {
		return "", badRequest("id: want a passkey's number")
	}
	var only *string
	if p.Role != roleAdmin {
		only = &p.Owner
	}
	gone, err := dbsqlc.New(s.cfg.Base.Pool).PasskeyDelete(r.Context(), id, only)
	noteOf(r).Target = fmt.Sprintf("passkey %d", id)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return "", httpError{code: http.StatusNotFound, msg: fmt.Sprintf("no passkey %d of yours", id)}
		}
		return "", err
	}
	noteOf(r).Target = fmt.Sprintf("passkey %d %s of %s", id, gone.Name, gone.Owner)
	return fmt.Sprintf("Deleted passkey %q of %s.", gone.Name, gone.Owner), nil
}
