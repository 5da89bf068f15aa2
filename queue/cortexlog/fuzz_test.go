package cortexlog

import (
	"testing"
)

// FuzzParseLog checks that no log makes ParseLog panic, leave the status outside NoProblem…Invalid
// or store a field over its column limit, not valid UTF-8, or holding a NUL.
func FuzzParseLog(f *testing.F) {
	for _, seed := range []string{
		"",
		"Info:conversion:0\n",
		"Fatal:invalid:x y\n\tz\r\nStatus:conversion:9\n",
		"(Loading /a/b.sty... \n\tq\nWarn:a:b\x00c \xff\xfe\n",
		"Info:cortex:retryable\nINFO:conversion:-2147483649\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, log []byte) {
		requireWellFormed(t, parseLog(log))
	})
}
