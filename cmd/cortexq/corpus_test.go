package main

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/internal/bench"
	"github.com/cortexq/cortexq/queue/api"
)

// cortexq corpus set and list: weights and priorities, the share of the last minute's leases
// (in status too), sandboxes at priority 1, and bad input refused with exit 2.
func TestCorpusSetAndList(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	a, err := bench.StageCorpus(d.ctx, t.TempDir(), 30, 64)
	require.NoError(t, err)
	b, err := bench.StageCorpus(d.ctx, t.TempDir(), 10, 64)
	require.NoError(t, err)
	d.importList("a", "echo", a...)
	d.importList("b", "echo", b...)

	require.Equal(t, "corpus a, service echo: weight 3, priority 0\n", d.ok("corpus", "set", "a", "--service", "echo", "--weight", "3"))
	require.Equal(t, "corpus a, service echo: weight 3, priority 2\n", d.ok("corpus", "set", "a", "--service", "echo", "--priority", "2"))
	for _, bad := range []struct {
		args []string
		says string
	}{
		{[]string{"corpus", "set", "nope", "--service", "echo", "--weight", "2"}, "corpus nope: not found"},
		{[]string{"corpus", "set", "a", "--service", "nope", "--weight", "2"}, "service nope: not found"},
		{[]string{"corpus", "set", "a", "--service", "echo", "--weight", "0"}, "--weight 0: want 1 to 1000000"},
		{[]string{"corpus", "set", "a", "--service", "echo", "--priority", "2000000"}, "--priority 2000000: want"},
		{[]string{"corpus", "set", "a", "--service", "echo"}, "give --weight, --priority or both"},
		{[]string{"corpus", "set", "a", "--weight", "2"}, "--service is required"},
		{[]string{"corpus", "set", "--service", "echo", "--weight", "2"}, "want one argument"},
		{[]string{"corpus", "list", "--service", "nope"}, "service nope: not found"},
		{[]string{"sandbox", "create", "sb", "--from", "a", "--service", "echo", "--priority", "-2000000"}, "--priority -2000000: want"},
	} {
		r := cortexq(t, d.env, bad.args...)
		require.Equal(t, 2, r.code, "%v: %s", bad.args, r.stderr)
		require.Contains(t, r.stderr, bad.says, "%v", bad.args)
	}

	// The priority corpus's tasks go first: 30 leases, all of a.
	leases := d.lease(d.scope("a", "echo").ServiceID, workerNames(30)...)
	require.Len(t, leases, 30)
	for _, l := range leases {
		require.Equal(t, d.scope("a", "echo").CorpusID, l.CorpusID)
	}
	require.Contains(t, d.ok("sandbox", "create", "sb", "--from", "a", "--service", "echo"), "30 tasks copied as TODO, priority 1;")

	var corpora api.Corpora
	require.NoError(t, json.Unmarshal([]byte(d.ok("corpus", "list", "--json")), &corpora))
	shares := corpora.Corpora
	require.Len(t, shares, 3)
	byName := map[string]api.CorpusShare{}
	for _, s := range shares {
		byName[s.Corpus] = s
	}
	require.Equal(t, api.CorpusShare{Corpus: "a", Service: "echo", Weight: 3, Priority: 2, Todo: 0, LeasesLastMinute: 30, LeaseShare: 1}, byName["a"])
	require.Equal(t, api.CorpusShare{Corpus: "b", Service: "echo", Weight: 1, Priority: 0, Todo: 10}, byName["b"])
	require.Equal(t, api.CorpusShare{Corpus: "sb", Service: "echo", Sandbox: true, Weight: 1, Priority: 1, Todo: 30}, byName["sb"])
	require.Equal(t, []string{"a", "sb", "b"}, []string{shares[0].Corpus, shares[1].Corpus, shares[2].Corpus}, "highest priority first")

	table := d.ok("corpus", "list")
	require.Contains(t, table, "LEASES/MIN")
	require.Regexp(t, `(?m)^a\s+echo\s+false\s+3\s+2\s+0\s+30\s+100\.0%$`, table)
	status := d.ok("status")
	require.Contains(t, status, "SHARE")
	require.Regexp(t, `(?m)^\s+a\s+echo\s+30\s.*\s30\s+100\.0%$`, status)
	require.Regexp(t, `(?m)^\s+b\s+echo\s+10\s.*\s0\s+0\.0%$`, status)
}

func workerNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("w%d", i)
	}
	return out
}
