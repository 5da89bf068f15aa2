package replica

import "github.com/cortexq/cortexq/queue/internal/startstop"

// Service, Group, Background and Funcs are startstop's (queue/internal/startstop), which the
// worker-facing side (queue/dispatch) uses inside itself too.
type (
	Service = startstop.Service
	Group   = startstop.Group
)

// Background returns a Service that runs run in a goroutine of its own (startstop.Background).
var Background = startstop.Background

// Funcs returns a Service of a start function that hands back the stop function (startstop.Funcs).
var Funcs = startstop.Funcs
