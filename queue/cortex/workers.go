package cortex

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// importWorkers brings CorTeX's worker_metadata of the services imported into workers: a
// worker cortexq knows keeps its earliest first sight, its latest times and its larger counts,
// so importing again changes nothing.
func (im *importer) importWorkers(ctx context.Context) (int64, error) {
	var n int64
	err := im.inDst(ctx, func(dst pgx.Tx) error {
		cortexIDs, ids := im.reg.serviceMap()
		if _, err := dst.Exec(ctx, `CREATE TEMP TABLE stage_workers (name text, service_id int, first_seen timestamptz,
			last_request timestamptz, last_result timestamptz, dispatched bigint, results bigint) ON COMMIT DROP`); err != nil {
			return err
		}
		if _, err := pipe(ctx, im.src, dst, `SELECT name, service_id, first_seen AT TIME ZONE 'UTC',
			time_last_dispatch AT TIME ZONE 'UTC', time_last_return AT TIME ZONE 'UTC',
			coalesce(total_dispatched, 0), coalesce(total_returned, 0) FROM worker_metadata`, "stage_workers"); err != nil {
			return err
		}
		tag, err := dst.Exec(ctx, `INSERT INTO workers AS w (name, service_id, first_seen, last_request, last_result, dispatched, results)
			SELECT s.name, m.service_id, coalesce(s.first_seen, now()), s.last_request, s.last_result, s.dispatched, s.results
			FROM stage_workers s
			JOIN (SELECT unnest($1::int[]) AS cortex_id, unnest($2::int[]) AS service_id) m ON m.cortex_id = s.service_id
			WHERE s.name <> ''
			ON CONFLICT (name, service_id) DO UPDATE
			SET first_seen = least(w.first_seen, excluded.first_seen),
			    last_request = greatest(w.last_request, excluded.last_request),
			    last_result = greatest(w.last_result, excluded.last_result),
			    dispatched = greatest(w.dispatched, excluded.dispatched),
			    results = greatest(w.results, excluded.results)
			WHERE (w.first_seen, w.last_request, w.last_result, w.dispatched, w.results) IS DISTINCT FROM
			      (least(w.first_seen, excluded.first_seen), greatest(w.last_request, excluded.last_request),
			       greatest(w.last_result, excluded.last_result), greatest(w.dispatched, excluded.dispatched),
			       greatest(w.results, excluded.results))`, cortexIDs, ids)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("workers: %w", err)
	}
	im.progress("workers: %d added or brought up to date", n)
	return n, nil
}
