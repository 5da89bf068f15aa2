package reports

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/queuetest"
)

// The SQL function status_severity (migrations/00017_status_severity.sql), which the report's
// queries use, and the Go table behind queue.StatusSeverity say the same for every status.
func TestStatusSeverityAgreesWithSQL(t *testing.T) {
	pool := queuetest.NewPool(t)
	for st := queue.Status(-7); st <= 1; st++ {
		var sql *string
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT status_severity($1::smallint)`, int16(st)).Scan(&sql))
		sev, final := queue.StatusSeverity(st)
		if !final {
			require.Nil(t, sql, "status %d is not final: SQL says %v", st, sql)
			continue
		}
		require.NotNil(t, sql, "status %d", st)
		require.Equal(t, string(sev), *sql, "status %d", st)
	}
}

// The fold's rollup levels (foldbatch.go) are the ones the SQL functions name for the queries
// that read the rollups.
func TestRollupLevelsAgreeWithSQL(t *testing.T) {
	pool := queuetest.NewPool(t)
	var messaged, category, what, status int16
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT rollup_messaged(), rollup_category(), rollup_what(), rollup_status()`).Scan(&messaged, &category, &what, &status))
	require.Equal(t, []int16{levelMessaged, levelCategory, levelWhat, levelStatus}, []int16{messaged, category, what, status})
}
