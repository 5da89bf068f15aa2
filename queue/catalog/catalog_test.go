package catalog

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/queuetest"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

func TestMain(m *testing.M) { queuetest.Main(m) }

// fixture is one test's database with a corpus "corpus" and a service "echo".
type fixture struct {
	ctx    context.Context
	q      *dbsqlc.Queries
	cat    *Catalog
	corpus int32
	svc    int32
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	t.Parallel()
	ctx := context.Background()
	pool := queuetest.NewPool(t)
	f := &fixture{ctx: ctx, q: dbsqlc.New(pool), cat: New(pool, nil)}
	c, err := f.q.CorpusCreate(ctx, "corpus", "/corpus", nil)
	require.NoError(t, err)
	svc, err := f.cat.AddService(ctx, "echo", 0)
	require.NoError(t, err)
	f.corpus, f.svc = c.ID, svc.ID
	return f
}

func TestCatalog(t *testing.T) {
	t.Run("FailedSandboxLookupIsNotCachedAsOrdinaryCorpus", func(t *testing.T) {
		f := newFixture(t)
		_, err := f.cat.Corpus(f.ctx, 1<<30)
		require.ErrorIs(t, err, queue.ErrNotFound)
		_, known := f.cat.CachedSandboxID(1 << 30)
		require.False(t, known, "an unresolved corpus stays unknown, not memoised as ordinary")
	})

	t.Run("DistinguishesUnknownCorpusFromOrdinary", func(t *testing.T) {
		f := newFixture(t)
		sandbox, err := f.q.CorpusCreate(f.ctx, "sandbox", "/sandbox", &f.corpus)
		require.NoError(t, err)
		c, err := f.cat.Corpus(f.ctx, f.corpus)
		require.NoError(t, err)
		require.Zero(t, c.SandboxID, "ordinary")
		c, err = f.cat.Corpus(f.ctx, sandbox.ID)
		require.NoError(t, err)
		require.Equal(t, sandbox.ID, c.SandboxID, "a sandbox is named by its own id")
		require.Equal(t, "/sandbox", c.Path)
		_, known := f.cat.CachedPlace("echo", sandbox.ID)
		require.False(t, known, "the service is not looked up yet")
		_, err = f.cat.Service(f.ctx, "echo")
		require.NoError(t, err)
		p, known := f.cat.CachedPlace("echo", sandbox.ID)
		require.True(t, known, "the service and the corpus are cached")
		require.Equal(t, Place{Service: Service{ID: f.svc, Name: "echo"}, Corpus: c}, p)
		_, known = f.cat.CachedPlace("echo", sandbox.ID+100)
		require.False(t, known, "a corpus not looked up is not cached")
		_, known = f.cat.CachedSandboxID(sandbox.ID + 100)
		require.False(t, known, "unknown")
		// A service added after a miss is seen without a restart.
		_, err = f.cat.Service(f.ctx, "late")
		require.ErrorIs(t, err, queue.ErrNotFound)
		_, err = f.cat.AddService(f.ctx, "late", 0)
		require.NoError(t, err)
		svc, err := f.cat.Service(f.ctx, "late")
		require.NoError(t, err)
		require.Equal(t, "late", svc.Name)
	})

	t.Run("LookupScopeNamesWhatIsUnknown", func(t *testing.T) {
		f := newFixture(t)
		sc, err := f.cat.LookupScope(f.ctx, "corpus", "echo")
		require.NoError(t, err)
		require.Equal(t, queue.Scope{CorpusID: f.corpus, ServiceID: f.svc}, sc)
		_, err = f.cat.LookupScope(f.ctx, "nope", "echo")
		require.ErrorIs(t, err, queue.ErrNotFound)
		require.ErrorContains(t, err, "corpus nope")
		require.ErrorContains(t, f.cat.CheckNames(f.ctx, "", "nope"), "service nope")
		require.NoError(t, f.cat.CheckNames(f.ctx, "", ""))
	})
}

func TestShares(t *testing.T) {
	t.Run("SetShareChecksItsInput", func(t *testing.T) {
		f := newFixture(t)
		scope := queue.Scope{CorpusID: f.corpus, ServiceID: f.svc}
		zero, big := int32(0), int32(WeightMax+1)
		_, _, err := f.cat.SetShare(f.ctx, scope, &zero, nil)
		require.ErrorContains(t, err, "weight 0")
		_, _, err = f.cat.SetShare(f.ctx, scope, nil, &big)
		require.ErrorContains(t, err, "priority")
		two := int32(2)
		w, p, err := f.cat.SetShare(f.ctx, scope, &two, nil)
		require.NoError(t, err)
		require.Equal(t, [2]int32{2, 0}, [2]int32{w, p})
		w, p, err = f.cat.SetShare(f.ctx, scope, nil, &two)
		require.NoError(t, err)
		require.Equal(t, [2]int32{2, 2}, [2]int32{w, p}, "what is not given stays")
	})
}

func TestCheckCorpusName(t *testing.T) {
	for _, bad := range []string{"", " lead", "trail ", "a\x01b", "\xff", string(make([]byte, 201))} {
		require.Error(t, CheckCorpusName(bad), "%q", bad)
	}
	require.NoError(t, CheckCorpusName("arxiv 2301"))
}
