package pgembed

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// SplitPassword takes the password out of a URL or keyword/value connection string, leaving the rest as it was.
func TestSplitPassword(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ dsn, rest, password string }{
		{"postgres://u:s3cret@h:5432/db?sslmode=disable", "postgres://u@h:5432/db?sslmode=disable", "s3cret"},
		{"postgresql://u@h/db?password=p%40ss&sslmode=disable", "postgresql://u@h/db?sslmode=disable", "p@ss"},
		{"postgres://postgres@/cortexq?host=%2Ftmp%2Fx&sslmode=disable", "postgres://postgres@/cortexq?host=%2Ftmp%2Fx&sslmode=disable", ""},
		{"host=/tmp user=u password=s3cret dbname=db", "host=/tmp user=u dbname=db", "s3cret"},
		{"host=h password = 'a b' dbname='d b'", "host=h dbname='d b'", "a b"},
		{`password='a \' b' user=u`, "user=u", "a ' b"},
		{"user=u", "user=u", ""},
	} {
		rest, password := SplitPassword(tc.dsn)
		require.Equal(t, tc.rest, rest, tc.dsn)
		require.Equal(t, tc.password, password, tc.dsn)
	}
}
