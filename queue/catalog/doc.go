// Package catalog is the corpora and services cortexq serves: creating services, importing a
// corpus's tasks, each corpus's fair share (weight and priority), looking them up by name, and
// the caches the hot paths look services and corpora up in. The lease state machine is
// queue/lease; what operators read about the work is queue/inspect.
package catalog
