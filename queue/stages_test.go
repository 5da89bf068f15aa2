package queue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestStagesEncodeDecode(t *testing.T) {
	st := NoStages()
	require.Nil(t, st.Encode(), "none recorded: no bytes")
	st[StageTodo] = 3 * time.Hour
	st[StageSource] = 0
	st[StageWorker] = 3400 * time.Millisecond
	st[StageWrite] = 1500 * time.Microsecond // kept as whole milliseconds
	b := st.Encode()
	// todo: 3 h = 10,800 s + 1 → 2 bytes; reserved unrecorded 1; source 1; worker 3401 ms → 2; write 1.
	require.Len(t, b, 7)
	got, err := DecodeStages(b)
	require.NoError(t, err)
	want := st
	want[StageWrite] = time.Millisecond
	require.Equal(t, want, got)
	require.False(t, got.Has(StageReserved))
	require.False(t, got.Has(StageClaim), "trailing stages left out are unrecorded")

	_, err = DecodeStages([]byte{0x80})
	require.Error(t, err, "a cut varint")
	_, err = DecodeStages([]byte{0x81, 0x81, 0x81, 0x81, 0x81, 0x81, 0x01})
	require.Error(t, err, "an overlong varint")
	long := append(append([]byte{}, b...), 5, 7, 9, 11, 13, 15) // stages of a later release are ignored
	got, err = DecodeStages(long)
	require.NoError(t, err)
	require.Equal(t, 6*time.Millisecond, got[StageClaim])
	require.Equal(t, 12*time.Millisecond, got[StagePack])

	huge := NoStages()
	huge[StageTodo] = 100 * 24 * time.Hour
	got, err = DecodeStages(huge.Encode())
	require.NoError(t, err)
	require.Equal(t, 100*24*time.Hour, got[StageTodo], "whole seconds")
	huge[StageConvert] = 100 * 24 * time.Hour
	got, err = DecodeStages(huge.Encode())
	require.NoError(t, err)
	require.Equal(t, time.Duration(maxStageMs)*time.Millisecond, got[StageConvert], "saturated")
	huge[StageTodo] = 2500 * time.Millisecond
	got, err = DecodeStages(huge.Encode())
	require.NoError(t, err)
	require.Equal(t, 2*time.Second, got[StageTodo], "the wait in TODO in whole seconds")
}

func TestStageLine(t *testing.T) {
	line := StageLine(12*time.Millisecond, 3400*time.Millisecond, -1)
	require.Equal(t, "Info:cortexq:stage_ms unpack=12 convert=3400", line)
	st := NoStages()
	require.True(t, ParseStageLine("unpack=12 convert=3400 pack=20 gc=5 bad x=y pack=-1", &st))
	require.Equal(t, 12*time.Millisecond, st[StageUnpack])
	require.Equal(t, 3400*time.Millisecond, st[StageConvert])
	require.Equal(t, 20*time.Millisecond, st[StagePack], "a negative value is skipped")
	require.False(t, ParseStageLine("gc=5 nothing", &st))

	st[StageWorker] = 4000 * time.Millisecond
	d, ok := st.Transfer()
	require.True(t, ok)
	require.Equal(t, 568*time.Millisecond, d)
	require.Equal(t, "worker 4s, transfer 568ms, unpack 12ms, convert 3.4s, pack 20ms", st.String())
	none := NoStages()
	none[StageWorker] = time.Second
	_, ok = none.Transfer()
	require.False(t, ok, "no worker stage reported: no transfer")
}
