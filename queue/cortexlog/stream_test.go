package cortexlog

import (
	"bytes"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
)

// repeatReader reads line over and over, n bytes in all.
type repeatReader struct {
	line string
	off  int
	n    int64
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.n)]
	k := 0
	for k < len(p) {
		c := copy(p[k:], r.line[r.off:])
		k += c
		r.off = (r.off + c) % len(r.line)
	}
	r.n -= int64(k)
	return k, nil
}

// TestReadLogMemoryIsBoundedByTheKeptMessages: reading a 48 MiB log of 2 KB warnings allocates
// about what the 1,000 kept messages take, not the log's size (it is read line by line). Not
// parallel: it measures the process's allocations.
func TestReadLogMemoryIsBoundedByTheKeptMessages(t *testing.T) {
	line := "Warning:amp:x " + strings.Repeat("x", 1990) + "\n"
	const lines = 25_000 // 48 MiB
	size := int64(lines * len(line))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got, err := Parse(&repeatReader{line: line, n: size}, Options{MaxLogBytes: size})
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.Len(t, got.Messages, MaxMessagesDefault+1)
	require.Contains(t, got.Messages[MaxMessagesDefault].Details, "25000 warning messages in all")
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %d KiB to read a %d MiB log", allocated>>10, size>>20)
	require.Less(t, allocated, uint64(8<<20), "bytes allocated")
}

// TestParseLogLongLines: a line longer than maxLineBytes is parsed from its first maxLineBytes
// (its fields are cut far below that anyway), the rest skipped, and the next line is whole.
func TestParseLogLongLines(t *testing.T) {
	t.Parallel()
	long := "Error:tex:long " + strings.Repeat("é", maxLineBytes) + "\xff\n"
	got := parseLog([]byte(long + "Warning:tex:next after\n" + strings.Repeat("y", 3*maxLineBytes) + "\nStatus:conversion:2\n"))
	require.Equal(t, queue.StatusError, got.Status)
	require.Len(t, got.Messages, 3)
	require.Equal(t, "long", got.Messages[0].What)
	require.Equal(t, warning("tex", "next", "after"), got.Messages[1])
	require.Equal(t, nonUTF8Log, got.Messages[2], "the skipped part of a line is checked for UTF-8 too")
}

// TestUTF8StreamAgreesWithValid: however bytes are split into pieces, utf8Stream says what
// utf8.Valid says of the whole.
func TestUTF8StreamAgreesWithValid(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "é", "€", "𝄞", "\xff", "\xe2\x82", "\xf0\x9d", "\x80", "\xed\xa0\x80"}
	for range 20_000 {
		var b bytes.Buffer
		for range rng.IntN(12) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		data := b.Bytes()
		var u utf8Stream
		for rest := data; ; {
			k := rng.IntN(len(rest) + 1)
			u.write(rest[:k])
			if rest = rest[k:]; len(rest) == 0 {
				break
			}
		}
		require.Equal(t, utf8.Valid(data), u.end(), "%q", data)
	}
}
