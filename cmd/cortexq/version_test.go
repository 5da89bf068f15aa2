package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/internal/version"
	"github.com/cortexq/cortexq/migrations"
)

func TestVersionCommandAndFlag(t *testing.T) {
	t.Parallel()
	cmd := cortexq(t, nil, "version")
	require.Equal(t, 0, cmd.code, cmd.stderr)
	flag := cortexq(t, nil, "--version")
	require.Equal(t, 0, flag.code, flag.stderr)
	require.Equal(t, cmd.stdout, flag.stdout, "cortexq version and cortexq --version print the same")
	want := regexp.MustCompile(`^cortexq v\d+\.\d+\.\d+\S* \(revision \S+, schema (\d+)\)\n$`)
	m := want.FindStringSubmatch(cmd.stdout)
	require.NotNil(t, m, "cortexq version printed %q", cmd.stdout)
	require.Equal(t, fmt.Sprint(migrations.Latest()), m[1], "the schema is the newest embedded migration")
	require.True(t, strings.HasPrefix(cmd.stdout, "cortexq "+version.Release()+" "), cmd.stdout)
}

func TestBuildInfoMetric(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	reg.MustRegister(buildInfo())
	families, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, families, 1)
	require.Equal(t, "cortexq_build_info", families[0].GetName())
	m := families[0].GetMetric()
	require.Len(t, m, 1)
	require.Equal(t, 1.0, m[0].GetGauge().GetValue())
	labels := map[string]string{}
	for _, l := range m[0].GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	require.Equal(t, map[string]string{"version": version.Release(), "revision": version.Revision(),
		"schema": fmt.Sprint(migrations.Latest())}, labels)
}
