//go:build !cortexq_testknobs

package main

import (
	"time"

	"github.com/urfave/cli/v2"
)

// The production binary has no test knobs: see clockskew.go, built with -tags cortexq_testknobs.

func clockSkewFlags() []cli.Flag { return nil }

func clockSkew(*cli.Context) func() time.Time { return nil }
