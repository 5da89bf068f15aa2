package web

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPasskeyCeremoniesAreSingleUseAndBounded: a ceremony is taken once, only as the kind it
// was begun as; past maxCeremonies pending a new one is refused until one has expired.
func TestPasskeyCeremoniesAreSingleUseAndBounded(t *testing.T) {
	var cs ceremonies
	withCookie := func(id string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/login/passkey/finish", nil)
		r.AddCookie(&http.Cookie{Name: ceremonyCookie, Value: id})
		return r
	}
	id, err := cs.put(&ceremony{owner: "alice"})
	require.NoError(t, err)
	_, err = cs.take(withCookie(id), true)
	require.Error(t, err, "a sign-in's ceremony does not finish an enrolment")
	_, err = cs.take(withCookie(id), false)
	require.Error(t, err, "taken (and lost) by the wrong kind's attempt")

	id, err = cs.put(&ceremony{owner: "alice"})
	require.NoError(t, err)
	c, err := cs.take(withCookie(id), false)
	require.NoError(t, err)
	require.Equal(t, "alice", c.owner)
	_, err = cs.take(withCookie(id), false)
	require.ErrorContains(t, err, "already used")
	_, err = cs.take(httptest.NewRequest(http.MethodPost, "/", nil), false)
	require.ErrorContains(t, err, "no passkey ceremony")

	var first string
	for i := range maxCeremonies {
		id, err := cs.put(&ceremony{})
		require.NoError(t, err)
		if i == 0 {
			first = id
		}
	}
	_, err = cs.put(&ceremony{})
	require.ErrorContains(t, err, "too many passkey ceremonies")
	cs.mu.Lock()
	cs.m[first].expires = time.Now().Add(-time.Second)
	cs.mu.Unlock()
	_, err = cs.put(&ceremony{})
	require.NoError(t, err, "an expired ceremony's place is free again")
	_, err = cs.take(withCookie(first), false)
	require.ErrorContains(t, err, "expired")
	_, err = cs.put(&ceremony{})
	require.Error(t, err, "full again")
}
