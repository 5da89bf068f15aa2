package lease

import (
	"context"
	"strings"

	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// KeyedWorker is the name a worker calling itself worker is recorded under when it
// authenticated with a key named key: "key:<key>/<worker>". The key part is what a CURVE
// replica vouches for; the worker part only tells apart the processes sharing a key.
func KeyedWorker(key, worker string) string { return keyPrefix(key) + worker }

func keyPrefix(key string) string { return "key:" + key + "/" }

// KeyOfWorker reports the name of the key a worker name was recorded under (KeyedWorker), or
// "" for a name without one. Key names have no '/', so the first one ends the key.
func KeyOfWorker(worker string) string {
	rest, ok := strings.CutPrefix(worker, "key:")
	if !ok {
		return ""
	}
	key, _, ok := strings.Cut(rest, "/")
	if !ok {
		return ""
	}
	return key
}

// KeyHoldsAttempt reports whether a worker of the key named key holds an attempt of task id in
// one of its dispatch rows: whether a reply authenticated with key can be anything but
// OutcomeNotHolder or OutcomeUnknown. Claim decides; this is a cheap look before the work a
// reply costs.
func (s *Store) KeyHoldsAttempt(ctx context.Context, id int64, key string) (bool, error) {
	held, err := dbsqlc.New(s.pool).DispatchHeldByKey(ctx, id, keyPrefix(key))
	if err != nil {
		return false, translate("look up the task's key holders", err)
	}
	return held, nil
}
