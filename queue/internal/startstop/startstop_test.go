package startstop

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// recorder is a Service that notes its starts and stops in a shared log.
type recorder struct {
	name string
	log  *[]string
	fail error
}

func (r *recorder) Start(context.Context) error {
	*r.log = append(*r.log, "start "+r.name)
	return r.fail
}

func (r *recorder) Stop() { *r.log = append(*r.log, "stop "+r.name) }

func TestGroupStartsInOrderAndStopsInReverse(t *testing.T) {
	var log []string
	var g Group
	require.NoError(t, g.Start(context.Background(), &recorder{"a", &log, nil}, &recorder{"b", &log, nil}, &recorder{"c", &log, nil}))
	g.Stop()
	g.Stop() // a second stop stops nothing more
	require.Equal(t, []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"}, log)
}

func TestGroupStopsWhatStartedWhenOneFails(t *testing.T) {
	var log []string
	var g Group
	boom := errors.New("boom")
	err := g.Start(context.Background(), &recorder{"a", &log, nil}, &recorder{"b", &log, boom}, &recorder{"c", &log, nil})
	require.ErrorIs(t, err, boom)
	g.Stop()
	require.Equal(t, []string{"start a", "start b", "stop a"}, log)
}

func TestBackgroundRunsUntilStopped(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	ended := false
	s := Background(func(ctx context.Context) {
		close(ran)
		<-ctx.Done()
		ended = true
	})
	require.NoError(t, s.Start(ctx))
	<-ran
	cancel() // the caller's context does not stop it when started through a Group; here it would
	s.Stop()
	require.True(t, ended)
	Background(func(context.Context) {}).Stop() // never started: nothing to stop
}

func TestFuncsStopsOnce(t *testing.T) {
	stops := 0
	s := Funcs(func(context.Context) (func(), error) { return func() { stops++ }, nil })
	require.NoError(t, s.Start(context.Background()))
	s.Stop()
	s.Stop()
	require.Equal(t, 1, stops)
	require.Error(t, Funcs(func(context.Context) (func(), error) { return nil, nil }).Start(context.Background()))
}
