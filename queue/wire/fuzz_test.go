package wire_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/cortexq/cortexq/queue/wire"
)

// fuzzFrames builds up to n%8 frames from the fixed frames and data, which is cut into the
// remaining frames (the first ones possibly empty).
func fuzzFrames(n uint8, fixed [][]byte, data []byte) [][]byte {
	count := int(n % 8)
	frames := slices.Clone(fixed)
	if count > len(frames) {
		pieces := count - len(frames)
		step := len(data) / pieces
		for i := range pieces {
			end := (i + 1) * step
			if i == pieces-1 {
				end = len(data)
			}
			frames = append(frames, data[i*step:end])
		}
	}
	return frames[:min(count, len(frames))]
}

func FuzzParseRequest(f *testing.F) {
	f.Add(uint8(2), []byte("host:echo:1"), []byte("tex_to_html"), []byte(""))
	f.Add(uint8(1), []byte("w"), []byte(""), []byte(""))
	f.Add(uint8(3), []byte("\x00\x80\x00\x00\x01"), []byte("a/b"), []byte("x"))
	f.Fuzz(func(t *testing.T, n uint8, identity, service, extra []byte) {
		frames := fuzzFrames(n, [][]byte{identity, service}, extra)
		id, svc, err := wire.ParseRequest(frames)
		if err != nil {
			if !slices.Contains(wire.Reasons, wire.ReasonOf(err)) {
				t.Fatalf("unknown reason %q in %v", wire.ReasonOf(err), err)
			}
			if id != nil || svc != "" {
				t.Fatalf("error with values: %q %q", id, svc)
			}
			return
		}
		if len(frames) < 2 || !bytes.Equal(id, frames[0]) || svc != string(frames[1]) || len(id) == 0 {
			t.Fatalf("ParseRequest(%q) = %q, %q", frames, id, svc)
		}
		checkService(t, svc)
	})
}

func FuzzParseResult(f *testing.F) {
	f.Add(uint8(4), []byte("host:echo:1"), []byte("echo"), []byte("42"), []byte("PK\x03\x04"))
	f.Add(uint8(6), []byte("\xff"), []byte("ech\xc3"), []byte("9223372036854775807"), []byte("abcdef"))
	f.Add(uint8(3), []byte("w"), []byte("echo"), []byte("1"), []byte(""))
	f.Add(uint8(4), []byte("w"), []byte("echo"), []byte("-1"), []byte(""))
	f.Fuzz(func(t *testing.T, n uint8, identity, service, taskID, data []byte) {
		frames := fuzzFrames(n, [][]byte{identity, service, taskID}, data)
		r, err := wire.ParseResult(frames)
		if err != nil {
			if !slices.Contains(wire.Reasons, wire.ReasonOf(err)) {
				t.Fatalf("unknown reason %q in %v", wire.ReasonOf(err), err)
			}
			return
		}
		if len(frames) < 4 || len(r.Data) != len(frames)-3 {
			t.Fatalf("accepted %d frames as %d data frames", len(frames), len(r.Data))
		}
		if r.TaskID <= 0 || !bytes.Equal(wire.FormatTaskID(r.TaskID), frames[2]) {
			t.Fatalf("task id frame %q parsed as %d", frames[2], r.TaskID)
		}
		if r.Identity != wire.UnknownWorker {
			if r.Identity != string(frames[0]) || !utf8.ValidString(r.Identity) || len(r.Identity) > wire.MaxIdentityBytes ||
				strings.IndexFunc(r.Identity, unicode.IsControl) >= 0 {
				t.Fatalf("identity %q from %q", r.Identity, frames[0])
			}
		}
		if r.Service != wire.UnknownService {
			if r.Service != string(frames[1]) {
				t.Fatalf("service %q from %q", r.Service, frames[1])
			}
			checkService(t, r.Service)
		}
		var size int64
		for i, d := range r.Data {
			if !bytes.Equal(d, frames[3+i]) {
				t.Fatalf("data frame %d differs", i)
			}
			size += int64(len(d))
		}
		if size != r.Size {
			t.Fatalf("size %d, frames hold %d", r.Size, size)
		}
	})
}

func checkService(t *testing.T, s string) {
	t.Helper()
	if s == "" || len(s) > wire.MaxServiceBytes || !utf8.ValidString(s) || s == "." || s == ".." ||
		strings.ContainsAny(s, `/\`) || strings.IndexFunc(s, unicode.IsControl) >= 0 {
		t.Fatalf("accepted service %q", s)
	}
}
