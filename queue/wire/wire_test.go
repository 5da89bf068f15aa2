package wire_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/wire"
)

func frames(parts ...string) [][]byte {
	out := make([][]byte, len(parts))
	for i, p := range parts {
		out[i] = []byte(p)
	}
	return out
}

func TestParseRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		frames   [][]byte
		identity string
		service  string
		reason   string
	}{
		{name: "IdentityAndService", frames: frames("w1", "tex_to_html"), identity: "w1", service: "tex_to_html"},
		{name: "ExtraFramesAreIgnored", frames: frames("w1", "echo", "", "junk"), identity: "w1", service: "echo"},
		{name: "BinaryIdentityRoutes", frames: frames("\x00\x80\x00\x00\x01", "echo"), identity: "\x00\x80\x00\x00\x01", service: "echo"},
		{name: "UnicodeService", frames: frames("w1", "größe_ß"), identity: "w1", service: "größe_ß"},
		{name: "ServiceAtLimit", frames: frames("w1", strings.Repeat("s", wire.MaxServiceBytes)), identity: "w1", service: strings.Repeat("s", wire.MaxServiceBytes)},
		{name: "NoFrames", frames: nil, reason: wire.ReasonEmptyMessage},
		{name: "EmptyIdentity", frames: frames("", "echo"), reason: wire.ReasonEmptyIdentity},
		{name: "IdentityOnly", frames: frames("w1"), reason: wire.ReasonIdentityOnly},
		{name: "EmptyService", frames: frames("w1", ""), reason: wire.ReasonEmptyService},
		{name: "EmptyServiceLikeAREQClient", frames: frames("w1", "", "echo"), reason: wire.ReasonEmptyService},
		{name: "ServiceNotUTF8", frames: frames("w1", "tex\xff"), reason: wire.ReasonServiceNotUTF8},
		{name: "ServiceTooLong", frames: frames("w1", strings.Repeat("s", wire.MaxServiceBytes+1)), reason: wire.ReasonServiceTooLong},
		{name: "ServiceWithSlash", frames: frames("w1", "../etc"), reason: wire.ReasonServiceBadChar},
		{name: "ServiceWithBackslash", frames: frames("w1", `a\b`), reason: wire.ReasonServiceBadChar},
		{name: "ServiceWithNUL", frames: frames("w1", "echo\x00"), reason: wire.ReasonServiceBadChar},
		{name: "ServiceWithNewline", frames: frames("w1", "echo\nFatal"), reason: wire.ReasonServiceBadChar},
		{name: "ServiceWithC1Control", frames: frames("w1", "echo\u0085"), reason: wire.ReasonServiceBadChar},
		{name: "ServiceDot", frames: frames("w1", "."), reason: wire.ReasonServiceBadChar},
		{name: "ServiceDotDot", frames: frames("w1", ".."), reason: wire.ReasonServiceBadChar},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			identity, service, err := wire.ParseRequest(tt.frames)
			if tt.reason != "" {
				require.Error(t, err)
				require.ErrorIs(t, err, wire.ErrMalformed)
				require.Equal(t, tt.reason, wire.ReasonOf(err))
				require.Contains(t, wire.Reasons, tt.reason)
				require.Contains(t, err.Error(), tt.reason)
				require.Nil(t, identity)
				require.Empty(t, service)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.identity, string(identity))
			require.Equal(t, tt.service, service)
		})
	}
}

func TestParseResult(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		frames [][]byte
		want   wire.Result
		reason string
	}{
		{
			name:   "OneDataFrame",
			frames: frames("host:echo:1", "echo", "42", "zipbytes"),
			want:   wire.Result{Identity: "host:echo:1", Service: "echo", TaskID: 42, Data: frames("zipbytes"), Size: 8},
		},
		{
			name:   "EmptyResultIsOneEmptyFrame",
			frames: frames("w", "echo", "7", ""),
			want:   wire.Result{Identity: "w", Service: "echo", TaskID: 7, Data: frames(""), Size: 0},
		},
		{
			name:   "ManyDataFramesAreSummed",
			frames: frames("w", "echo", "9223372036854775807", "abc", "de", ""),
			want:   wire.Result{Identity: "w", Service: "echo", TaskID: 9223372036854775807, Data: frames("abc", "de", ""), Size: 5},
		},
		{
			name:   "IdentityNotUTF8",
			frames: frames("\xff\xfe", "echo", "1", "x"),
			want:   wire.Result{Identity: wire.UnknownWorker, Service: "echo", TaskID: 1, Data: frames("x"), Size: 1},
		},
		{
			name:   "IdentityEmptyOrWithNUL",
			frames: frames("a\x00b", "echo", "1", "x"),
			want:   wire.Result{Identity: wire.UnknownWorker, Service: "echo", TaskID: 1, Data: frames("x"), Size: 1},
		},
		{
			name:   "IdentityTooLong",
			frames: frames(strings.Repeat("w", wire.MaxIdentityBytes+1), "echo", "1", "x"),
			want:   wire.Result{Identity: wire.UnknownWorker, Service: "echo", TaskID: 1, Data: frames("x"), Size: 1},
		},
		{
			name:   "ServiceNotUTF8",
			frames: frames("w", "ech\xc3", "1", "x"),
			want:   wire.Result{Identity: "w", Service: wire.UnknownService, TaskID: 1, Data: frames("x"), Size: 1},
		},
		{
			name:   "ServiceWithSlash",
			frames: frames("w", "a/b", "1", "x"),
			want:   wire.Result{Identity: "w", Service: wire.UnknownService, TaskID: 1, Data: frames("x"), Size: 1},
		},
		{name: "NoFrames", frames: nil, reason: wire.ReasonTooFewFrames},
		{name: "ThreeFrames", frames: frames("w", "echo", "1"), reason: wire.ReasonTooFewFrames},
		{name: "TaskIDZero", frames: frames("w", "echo", "0", ""), reason: wire.ReasonBadTaskID},
		{name: "TaskIDMinusOne", frames: frames("w", "echo", "-1", ""), reason: wire.ReasonBadTaskID},
		{name: "TaskIDNegative", frames: frames("w", "echo", "-42", ""), reason: wire.ReasonBadTaskID},
		{name: "TaskIDPlusSign", frames: frames("w", "echo", "+42", ""), reason: wire.ReasonBadTaskID},
		{name: "TaskIDLeadingZero", frames: frames("w", "echo", "042", ""), reason: wire.ReasonBadTaskID},
		{name: "TaskIDSpaces", frames: frames("w", "echo", " 42", ""), reason: wire.ReasonBadTaskID},
		{name: "TaskIDTrailingNUL", frames: frames("w", "echo", "42\x00", ""), reason: wire.ReasonBadTaskID},
		{name: "TaskIDEmpty", frames: frames("w", "echo", "", ""), reason: wire.ReasonBadTaskID},
		{name: "TaskIDWord", frames: frames("w", "echo", "abc", ""), reason: wire.ReasonBadTaskID},
		{name: "TaskIDOverflow", frames: frames("w", "echo", "9223372036854775808", ""), reason: wire.ReasonBadTaskID},
		{name: "TaskIDTooManyDigits", frames: frames("w", "echo", "12345678901234567890", ""), reason: wire.ReasonBadTaskID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := wire.ParseResult(tt.frames)
			if tt.reason != "" {
				require.ErrorIs(t, err, wire.ErrMalformed)
				require.Equal(t, tt.reason, wire.ReasonOf(err))
				require.Equal(t, wire.Result{}, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestReasonOfOtherErrors(t *testing.T) {
	t.Parallel()
	require.Empty(t, wire.ReasonOf(nil))
	require.Empty(t, wire.ReasonOf(errors.New("other")))
	_, err := wire.ParseResult(nil)
	require.Equal(t, wire.ReasonTooFewFrames, wire.ReasonOf(errors.Join(errors.New("sink"), err)))
}

func TestTaskIDRoundTrip(t *testing.T) {
	t.Parallel()
	for _, id := range []int64{1, 9, 10, 123456, 1<<53 + 1, 9223372036854775807} {
		frame := wire.FormatTaskID(id)
		got, err := wire.ParseTaskID(frame)
		require.NoError(t, err)
		require.Equal(t, id, got)
	}
	require.Equal(t, "0", string(wire.FormatTaskID(0)))
	require.Equal(t, "-5", string(wire.FormatTaskID(-5)))
}

func TestMock(t *testing.T) {
	t.Parallel()
	reply := mockReply()
	require.Equal(t, [][]byte{[]byte("0"), {}}, reply)
	require.True(t, wire.IsMock(reply[0]))
	require.True(t, wire.IsMock([]byte("-1")))
	require.False(t, wire.IsMock([]byte("1")))
	require.False(t, wire.IsMock([]byte("")))
	require.False(t, wire.IsMock([]byte("00")))

	reply[0][0] = 'x' // a fresh slice each time
	require.Equal(t, "0", string(mockReply()[0]))
}

func TestWorkerName(t *testing.T) {
	t.Parallel()
	require.Equal(t, "host:echo:12-03", wire.WorkerName([]byte("host:echo:12-03")))
	require.Equal(t, "_worker_0080000001", wire.WorkerName([]byte("\x00\x80\x00\x00\x01")))
	require.Equal(t, "_worker_", wire.WorkerName(nil))
	long := wire.WorkerName(bytes.Repeat([]byte{0xff}, 300))
	require.Equal(t, len("_worker_")+2*wire.MaxIdentityBytes, len(long))
}

// chunkSizes runs WriteChunks and returns the frame sizes, the more flags and the bytes.
func chunkSizes(t *testing.T, r io.Reader, size int) (sizes []int, more []bool, data []byte) {
	t.Helper()
	err := wire.NewChunker(size).WriteChunks(r, func(frame []byte, m bool) error {
		sizes = append(sizes, len(frame))
		more = append(more, m)
		data = append(data, frame...)
		return nil
	})
	require.NoError(t, err)
	return sizes, more, data
}

func TestWriteChunks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		len   int
		size  int
		sizes []int
	}{
		{name: "EmptyIsOneEmptyFrame", len: 0, size: 10, sizes: []int{0}},
		{name: "ShorterThanOneChunk", len: 7, size: 10, sizes: []int{7}},
		{name: "ExactlyOneChunkEndsWithEmptyFrame", len: 10, size: 10, sizes: []int{10, 0}},
		{name: "ExactMultipleEndsWithEmptyFrame", len: 200000, size: wire.MessageSize, sizes: []int{100000, 100000, 0}},
		{name: "LastChunkShorter", len: 250000, size: wire.MessageSize, sizes: []int{100000, 100000, 50000}},
		{name: "DefaultSize", len: 100001, size: 0, sizes: []int{100000, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			payload := make([]byte, tt.len)
			for i := range payload {
				payload[i] = byte(i * 7)
			}
			// OneByteReader makes every read short: chunks must still be full.
			for _, r := range []io.Reader{bytes.NewReader(payload), iotest.OneByteReader(bytes.NewReader(payload)), iotest.DataErrReader(bytes.NewReader(payload))} {
				sizes, more, data := chunkSizes(t, r, tt.size)
				require.Equal(t, tt.sizes, sizes)
				for i, m := range more {
					require.Equal(t, i < len(more)-1, m, "frame %d more flag", i)
				}
				require.True(t, bytes.Equal(payload, data), "payload round trip")
			}
		})
	}
}

func TestChunkerReusesOneBuffer(t *testing.T) { // not parallel: AllocsPerRun
	c := wire.NewChunker(4)
	require.Equal(t, 4, c.Size())
	var first *byte
	for range 3 {
		err := c.WriteChunks(strings.NewReader("abcdefghij"), func(frame []byte, _ bool) error {
			if cap(frame) == 0 {
				return nil
			}
			p := &frame[:1][0]
			if first == nil {
				first = p
			}
			require.Same(t, first, p)
			return nil
		})
		require.NoError(t, err)
	}
	allocs := testing.AllocsPerRun(20, func() {
		_ = c.WriteChunks(strings.NewReader("abcdefghij"), func([]byte, bool) error { return nil })
	})
	require.LessOrEqual(t, allocs, 1.0) // the strings.Reader only
}

func TestWriteChunksReadErrorLeavesTheMessageOpen(t *testing.T) {
	t.Parallel()
	boom := errors.New("disk on fire")
	r := io.MultiReader(strings.NewReader("abcdef"), iotest.ErrReader(boom))
	var sizes []int
	var more []bool
	err := wire.NewChunker(4).WriteChunks(r, func(frame []byte, m bool) error {
		sizes = append(sizes, len(frame))
		more = append(more, m)
		return nil
	})
	require.ErrorIs(t, err, boom)
	// The full chunk went out with more set; the 2 bytes read before the error did not, and no
	// frame ended the message: the peer must never see a cut payload as a whole one.
	require.Equal(t, []int{4}, sizes)
	require.Equal(t, []bool{true}, more)
}

func TestSendChunksFramesAsWriteChunks(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 3, 4, 5, 8, 11} {
		payload := bytes.Repeat([]byte{'x'}, n)
		var want, got []int
		var wantMore, gotMore []bool
		c := wire.NewChunker(4)
		require.NoError(t, c.WriteChunks(bytes.NewReader(payload), func(f []byte, m bool) error {
			want, wantMore = append(want, len(f)), append(wantMore, m)
			return nil
		}))
		var data []byte
		require.NoError(t, c.SendChunks(payload, func(f []byte, m bool) error {
			got, gotMore = append(got, len(f)), append(gotMore, m)
			data = append(data, f...)
			return nil
		}))
		require.Equal(t, want, got, "%d bytes", n)
		require.Equal(t, wantMore, gotMore, "%d bytes", n)
		require.True(t, bytes.Equal(payload, data), "%d bytes round trip", n)
	}
}

func TestWriteChunksSendErrorStops(t *testing.T) {
	t.Parallel()
	boom := errors.New("EAGAIN")
	calls := 0
	err := wire.NewChunker(10).WriteChunks(strings.NewReader(strings.Repeat("x", 100)), func([]byte, bool) error {
		calls++
		if calls == 2 {
			return boom
		}
		return nil
	})
	require.ErrorIs(t, err, boom)
	require.Equal(t, 2, calls)
}

// fakeClock is a settable clock for RateLimiter.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestRateLimiter(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := &wire.RateLimiter{Interval: 5 * time.Second, NowFunc: clock.now}

	type rec struct {
		n    uint64
		emit bool
	}
	record := func() rec { n, emit := l.Record(); return rec{n, emit} }

	require.Equal(t, rec{1, true}, record(), "first event logs at once")
	clock.advance(time.Second)
	require.Equal(t, rec{1, false}, record())
	require.Equal(t, rec{2, false}, record())
	clock.advance(3 * time.Second)
	require.Equal(t, rec{3, false}, record(), "4s after the last line: still held back")
	clock.advance(time.Second)
	require.Equal(t, rec{4, true}, record(), "5s after the last line: a summary of 4")
	clock.advance(10 * time.Second)
	require.Equal(t, rec{1, true}, record(), "a quiet stretch: the next event logs at once")
	require.Equal(t, rec{1, false}, record())
	require.Equal(t, uint64(1), l.Flush())
	require.Equal(t, uint64(0), l.Flush())
	clock.advance(5 * time.Second)
	require.Equal(t, rec{1, true}, record())
}

func TestRateLimiterZeroValue(t *testing.T) {
	t.Parallel()
	var l wire.RateLimiter
	n, emit := l.Record()
	require.True(t, emit)
	require.Equal(t, uint64(1), n)
	n, emit = l.Record()
	require.False(t, emit, "the default interval is %s", wire.DefaultLogInterval)
	require.Equal(t, uint64(1), n)
	require.Equal(t, time.Minute, wire.NewRateLimiter(time.Minute).Interval)
}

// mockReply returns the frames of a "no work" reply, ["0", ""].
func mockReply() [][]byte { return [][]byte{[]byte(wire.MockTaskID), {}} }
