package cortexlog

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
)

// member is one file of a test archive.
type member struct {
	name string
	body string
	// store writes the member uncompressed instead of deflated.
	store bool
}

// zipBytes builds an archive of members.
func zipBytes(t testing.TB, members ...member) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, m := range members {
		method := zip.Deflate
		if m.store {
			method = zip.Store
		}
		f, err := w.CreateHeader(&zip.FileHeader{Name: m.name, Method: method})
		require.NoError(t, err)
		_, err = f.Write([]byte(m.body))
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	return buf.Bytes()
}

// writeFile writes data to a new file in a temporary directory and returns its path.
func writeFile(t testing.TB, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "service.zip")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path
}

const okLog = "Warning:tex:undefined \\foo\n\tat line 3\nStatus:conversion:1\n"

var okReport = queue.Report{
	Status:   queue.StatusWarning,
	Messages: []queue.Message{warning("tex", "undefined", "\\foo\n\tat line 3")},
}

func TestFromArchive(t *testing.T) {
	t.Parallel()
	// 65,546 members declared as 10: archive/zip compares counts modulo 65,536 only.
	understated := setDeclaredCount(zipBytes(t, append(members(1<<16+9), member{name: "cortex.log", body: okLog})...), 10)
	tests := []struct {
		name string
		data []byte
		opts Options
		want queue.Report
		// unusable, when set, is a text the ErrUnusable error must contain.
		unusable string
	}{
		{
			name: "ReadsOnlyCortexLog",
			data: zipBytes(t,
				member{name: "paper.html", body: "<html>Invalid:x:y</html>\n"},
				member{name: "cortex.log", body: okLog},
				member{name: "status", body: "Invalid:x:y\n"}),
			want: okReport,
		},
		{
			name: "StoredCortexLog",
			data: zipBytes(t, member{name: "cortex.log", body: okLog, store: true}),
			want: okReport,
		},
		{
			name: "EmptyCortexLogIsFatal",
			data: zipBytes(t, member{name: "cortex.log"}),
			want: queue.Report{Status: queue.StatusFatal},
		},
		{
			name: "TopLevelCortexLogWinsOverNestedOne",
			data: zipBytes(t,
				member{name: "x/cortex.log", body: "Status:conversion:3\n"},
				member{name: "cortex.log", body: okLog}),
			want: okReport,
		},
		{
			name: "MemberCountAtTheLimitIsRead",
			data: zipBytes(t, append(members(99), member{name: "cortex.log", body: okLog})...),
			opts: Options{MaxMembers: 100},
			want: okReport,
		},
		{
			name:     "NoCortexLogIsUnusable",
			data:     zipBytes(t, member{name: "paper.html", body: "<html/>"}),
			unusable: "no cortex.log member",
		},
		{
			name:     "NestedCortexLogDoesNotCount",
			data:     zipBytes(t, member{name: "x/cortex.log", body: okLog}),
			unusable: "no cortex.log member",
		},
		{
			name:     "OtherCaseDoesNotCount",
			data:     zipBytes(t, member{name: "Cortex.log", body: okLog}, member{name: "cortex.log/", body: ""}),
			unusable: "no cortex.log member",
		},
		{name: "EmptyFileIsUnusable", data: []byte{}, unusable: "not a valid zip"},
		{name: "TextFileIsUnusable", data: []byte(okLog), unusable: "not a valid zip"},
		{
			name:     "TruncatedZipIsUnusable",
			data:     zipBytes(t, member{name: "cortex.log", body: okLog})[:40],
			unusable: "not a valid zip",
		},
		{
			name:     "CorruptCortexLogIsUnusable",
			data:     corruptMember(t, zipBytes(t, member{name: "cortex.log", body: okLog, store: true}), okLog),
			unusable: "checksum error",
		},
		{
			name:     "TooManyMembersIsUnusable",
			data:     zipBytes(t, append(members(100), member{name: "cortex.log", body: okLog})...),
			opts:     Options{MaxMembers: 100},
			unusable: "101 members declared, more than 100",
		},
		{
			name:     "UnderstatedMemberCountIsCaughtByDirectorySize",
			data:     understated,
			opts:     Options{MaxMembers: 100},
			unusable: "central directory of",
		},
		{
			name:     "UnderstatedMemberCountIsCaughtByMemberCount",
			data:     understated,
			opts:     Options{MaxMembers: 10_000},
			unusable: "65546 members, more than 10000",
		},
		{
			name:     "Zip64DeclaringHugeMemberCountIsUnusable",
			data:     zip64End(1 << 40),
			unusable: "1099511627776 members declared",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := fromArchive(writeFile(t, tt.data), tt.opts)
			if tt.unusable != "" {
				require.ErrorIs(t, err, ErrUnusable)
				require.ErrorContains(t, err, tt.unusable)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)

			// The same archive in memory gives the same report.
			got, err = FromReaderAt(bytes.NewReader(tt.data), int64(len(tt.data)), tt.opts)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestFromArchiveMissingFileIsUnusable(t *testing.T) {
	t.Parallel()
	_, err := fromArchive(filepath.Join(t.TempDir(), "absent.zip"), Options{})
	require.ErrorIs(t, err, ErrUnusable)
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestFromArchiveDirectoryIsUnusable(t *testing.T) {
	t.Parallel()
	_, err := fromArchive(t.TempDir(), Options{})
	require.ErrorIs(t, err, ErrUnusable)
	require.ErrorContains(t, err, "not a regular file")
}

// TestFromArchiveBombIsReadUpToTheLimit: a small archive inflating to a log far over the limit is
// read up to the limit only, flagged, and its status line (past the limit) lost.
func TestFromArchiveBombIsReadUpToTheLimit(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	line := "Warning:bomb:tick the same line again\n"
	body := strings.Repeat(line, (32<<20)/len(line)) + "Status:conversion:0\n"
	data := zipBytes(t, member{name: "cortex.log", body: body})
	require.Less(t, len(data), 1<<20, "the archive is small")

	got, err := fromArchive(writeFile(t, data), Options{MaxLogBytes: limit})
	require.NoError(t, err)
	require.Equal(t, queue.StatusFatal, got.Status)
	require.Greater(t, limit/len(line), MaxMessagesDefault)
	require.Len(t, got.Messages, MaxMessagesDefault+2)
	require.Equal(t, "messages_truncated", got.Messages[MaxMessagesDefault].What)
	require.Contains(t, got.Messages[MaxMessagesDefault].Details, fmt.Sprintf("%d warning messages in all", limit/len(line)))
	require.Equal(t, warning("bomb", "tick", "the same line again"), got.Messages[0])
	last := got.Messages[len(got.Messages)-1]
	require.Equal(t, "log_truncated", last.What)
	require.Contains(t, last.Details, fmt.Sprint(limit))
}

// TestFromArchiveDefaultMemberLimit builds an archive one member over MaxMembersDefault.
func TestFromArchiveDefaultMemberLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an archive of 100,001 members")
	}
	t.Parallel()
	data := zipBytes(t, append(members(MaxMembersDefault), member{name: "cortex.log", body: okLog})...)
	_, err := fromArchive(writeFile(t, data), Options{})
	require.ErrorIs(t, err, ErrUnusable)
	require.ErrorContains(t, err, "members declared")
}

// members returns n empty members named m0, m1, ….
func members(n int) []member {
	ms := make([]member, n)
	for i := range ms {
		ms[i] = member{name: fmt.Sprint("m", i), store: true}
	}
	return ms
}

// corruptMember flips a byte of a stored member's body so its checksum fails.
func corruptMember(t testing.TB, data []byte, body string) []byte {
	t.Helper()
	i := bytes.Index(data, []byte(body))
	require.GreaterOrEqual(t, i, 0)
	data = bytes.Clone(data)
	data[i] ^= 0x20
	return data
}

// setDeclaredCount rewrites the member counts of an archive's end record (its zip64 record when
// it has one).
func setDeclaredCount(data []byte, n uint16) []byte {
	le := binary.LittleEndian
	data = bytes.Clone(data)
	end := len(data) - directoryEndLen
	if le.Uint16(data[end+10:]) == 0xffff {
		end64 := le.Uint64(data[end-directory64LocLen+8:])
		le.PutUint64(data[end64+24:], uint64(n))
		le.PutUint64(data[end64+32:], uint64(n))
		return data
	}
	le.PutUint16(data[end+8:], n)
	le.PutUint16(data[end+10:], n)
	return data
}

// zip64End builds an archive made only of end records whose zip64 record declares n members.
func zip64End(n uint64) []byte {
	var b []byte
	le := binary.LittleEndian
	// zip64 end of central directory record, at offset 0.
	b = le.AppendUint32(b, directory64EndSignature)
	b = le.AppendUint64(b, directory64EndLen-12)
	b = le.AppendUint16(b, 45)
	b = le.AppendUint16(b, 45)
	b = le.AppendUint32(b, 0)
	b = le.AppendUint32(b, 0)
	b = le.AppendUint64(b, n)
	b = le.AppendUint64(b, n)
	b = le.AppendUint64(b, 0) // directory size
	b = le.AppendUint64(b, 0) // directory offset
	// zip64 locator.
	b = le.AppendUint32(b, directory64LocSignature)
	b = le.AppendUint32(b, 0)
	b = le.AppendUint64(b, 0)
	b = le.AppendUint32(b, 1)
	// End of central directory record, pointing at zip64.
	b = le.AppendUint32(b, directoryEndSignature)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint16(b, 0xffff)
	b = le.AppendUint16(b, 0xffff)
	b = le.AppendUint32(b, 0xffffffff)
	b = le.AppendUint32(b, 0xffffffff)
	b = le.AppendUint16(b, 0)
	return b
}
