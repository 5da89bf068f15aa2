package allowlist_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/allowlist"
	"github.com/cortexq/cortexq/queue/queuetest"
)

func TestMain(m *testing.M) { queuetest.Main(m) }

func TestAllowList(t *testing.T) {
	ctx := context.Background()
	l := allowlist.New(queuetest.NewPool(t))
	const k1 = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
	const k2 = "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID"
	_, err := l.Allow(ctx, "short", "alice")
	require.Error(t, err)
	_, err = l.Allow(ctx, k1, "a/b")
	require.Error(t, err, "a name with a path character")
	_, err = l.Allow(ctx, k1, "alice")
	require.NoError(t, err)
	_, err = l.Allow(ctx, k2, "alice")
	require.NoError(t, err, "two keys may share a name during a rotation")
	allowed, err := l.Allowed(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]string{k1: "alice", k2: "alice"}, allowed)

	revoked, err := l.Revoke(ctx, k1, "")
	require.NoError(t, err)
	require.Len(t, revoked, 1)
	allowed, err = l.Allowed(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]string{k2: "alice"}, allowed)
	_, err = l.Revoke(ctx, k1, "")
	require.ErrorIs(t, err, queue.ErrNotFound, "already revoked")

	// Allowing a revoked key again lets it back in.
	_, err = l.Allow(ctx, k1, "alice2")
	require.NoError(t, err)
	revoked, err = l.Revoke(ctx, "", "alice")
	require.NoError(t, err)
	require.Len(t, revoked, 1)
	require.Equal(t, k2, revoked[0].PublicKey)
	allowed, err = l.Allowed(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]string{k1: "alice2"}, allowed)
	all, err := l.All(ctx)
	require.NoError(t, err)
	require.Len(t, all, 2)
}
