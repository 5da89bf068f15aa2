package cortex

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"
)

// copyBuffer is the bytes a pipe hands over at a time.
const copyBuffer = 64 << 10

// errCopyEnded is what a CorTeX COPY still sending meets once cortexq's side has ended.
var errCopyEnded = errors.New("the copy into cortexq ended")

// pipe streams the rows of query on the CorTeX side (COPY TO) into table on cortexq's (COPY
// FROM), in PostgreSQL's text format: the two ends run together through an io.Pipe, so memory
// holds a buffer (copyBuffer), not the rows. It returns the rows copied.
func pipe(ctx context.Context, src, dst pgx.Tx, query, table string) (int64, error) {
	return pipeIn(ctx, src, dst, query, table, "")
}

// pipeBinary is pipe in PostgreSQL's binary format: nothing to quote on one side and parse on
// the other, but each of query's columns must have the type of table's column it goes to (cast
// it in query).
func pipeBinary(ctx context.Context, src, dst pgx.Tx, query, table string) (int64, error) {
	return pipeIn(ctx, src, dst, query, table, " (FORMAT binary)")
}

func pipeIn(ctx context.Context, src, dst pgx.Tx, query, table, format string) (int64, error) {
	pr, pw := io.Pipe()
	sent := make(chan error, 1)
	go func() {
		// CopyTo writes a row at a time: buffered, the pipe hands over 64 KiB at a time rather
		// than waking the reader for every row.
		bw := bufio.NewWriterSize(pw, copyBuffer)
		_, err := src.Conn().PgConn().CopyTo(ctx, bw, "COPY ("+query+") TO STDOUT"+format)
		if err == nil {
			err = bw.Flush()
		}
		pw.CloseWithError(err) // nil: the reader sees EOF
		sent <- err
	}()
	tag, err := dst.Conn().PgConn().CopyFrom(ctx, pr, "COPY "+table+" FROM STDIN"+format)
	pr.CloseWithError(errCopyEnded) // unblocks a writer still sending
	if srcErr := <-sent; srcErr != nil && !errors.Is(srcErr, errCopyEnded) {
		return 0, fmt.Errorf("read from CorTeX for %s: %w", table, srcErr)
	}
	if err != nil {
		return 0, fmt.Errorf("copy into %s: %w", table, err)
	}
	return tag.RowsAffected(), nil
}

// quoteLiteral quotes s as an SQL string literal (COPY takes no parameters).
func quoteLiteral(s string) string {
	out := []byte{'\''}
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			out = append(out, '\'')
		}
		out = append(out, s[i])
	}
	return string(append(out, '\''))
}
