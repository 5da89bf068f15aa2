package queue

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Stage is one step of an attempt's way from TODO to its committed result
// (docs/stages.md). The order is the order of attempts.stages.
type Stage int

// The stages an attempt records. The first seven are measured by the dispatcher, the last three
// reported by the worker in its cortex.log (StageLine).
const (
	// StageTodo is the wait in TODO: from the import, rerun or resume (tasks.todo_since) to the
	// reservation, on the database clock (the reservation dated by the replica's monotonic age
	// of it at the claim). First attempts of a run only.
	StageTodo Stage = iota
	// StageReserved is from the reservation to the hand-out (the replica's monotonic clock).
	StageReserved
	// StageSource is the hand-out: the source archive read and queued on the worker's socket.
	StageSource
	// StageWorker is from the source queued to the result received whole: the worker's
	// round trip, transfers both ways included (ZeroMQ delivers a message whole, so the result's
	// transfer is not seen apart from it).
	StageWorker
	// StageWrite is the result's archive written to its temp file and its cortex.log parsed.
	StageWrite
	// StageClaimWait is from the parsed result queued for a claim to the start of the claim that
	// committed it: the wait for a batch and for the claims before it.
	StageClaimWait
	// StageClaim is the claim that committed the result: its transaction, from its start to its
	// commit (the commit's round trip estimated from the store's last claim).
	StageClaim
	// StageUnpack, StageConvert and StagePack are the worker's own, from its stage line.
	StageUnpack
	StageConvert
	StagePack
	// NumStages is how many stages there are.
	NumStages
)

// stageNames are the stages' names, as the CLI, the API and /metrics give them.
var stageNames = [NumStages]string{"todo", "reserved", "source", "worker", "write", "claim_wait", "claim", "unpack", "convert", "pack"}

// String returns the stage's name.
func (s Stage) String() string {
	if s < 0 || s >= NumStages {
		return "stage" + strconv.Itoa(int(s))
	}
	return stageNames[s]
}

// WorkerStages are the stages a worker reports itself.
var WorkerStages = []Stage{StageUnpack, StageConvert, StagePack}

// Stages are an attempt's stage times; a negative one is not recorded.
type Stages [NumStages]time.Duration

// NoStages returns Stages with none recorded.
func NoStages() Stages {
	var s Stages
	for i := range s {
		s[i] = -1
	}
	return s
}

// Has reports whether stage st is recorded.
func (s *Stages) Has(st Stage) bool { return s[st] >= 0 }

// Any reports whether any stage is recorded.
func (s *Stages) Any() bool {
	for _, d := range s {
		if d >= 0 {
			return true
		}
	}
	return false
}

// String lists the recorded stages, in order: "todo 3s, reserved 2ms, ..., transfer 100ms, ...".
func (s *Stages) String() string {
	var parts []string
	for st := Stage(0); st < NumStages; st++ {
		if s.Has(st) {
			parts = append(parts, st.String()+" "+s[st].String())
		}
		if st == StageWorker {
			if d, ok := s.Transfer(); ok {
				parts = append(parts, "transfer "+d.String())
			}
		}
	}
	return strings.Join(parts, ", ")
}

// Transfer is what the worker's round trip took beyond the stages it reported: the network both
// ways and its own loop. ok is false unless the round trip and at least one worker stage are
// recorded.
func (s *Stages) Transfer() (d time.Duration, ok bool) {
	if !s.Has(StageWorker) {
		return 0, false
	}
	d = s[StageWorker]
	for _, st := range WorkerStages {
		if s.Has(st) {
			d -= s[st]
			ok = true
		}
	}
	return max(d, 0), ok
}

// maxStageMs bounds a stored stage, in its unit: about 24.8 days of milliseconds.
const maxStageMs = 1<<31 - 2

// unit is the unit a stage is stored in: whole seconds for the wait in TODO (hours, where
// milliseconds would cost two bytes more), milliseconds for the rest.
func (s Stage) unit() time.Duration {
	if s == StageTodo {
		return time.Second
	}
	return time.Millisecond
}

// Encode packs the stages into attempts.stages: for each stage in order, an unsigned LEB128
// varint of its time plus one (0: not recorded), the trailing unrecorded ones left out; the time
// in whole seconds for the wait in TODO, in milliseconds for the rest.
// nil if none is recorded. A typical attempt takes 10-16 bytes
// (docs/stages.md#storage).
func (s *Stages) Encode() []byte {
	n := int(NumStages)
	for n > 0 && s[n-1] < 0 {
		n--
	}
	if n == 0 {
		return nil
	}
	b := make([]byte, 0, n+4)
	for i, d := range s[:n] {
		var v uint64
		if d >= 0 {
			v = uint64(min(int64(d/Stage(i).unit()), maxStageMs)) + 1
		}
		for v >= 0x80 {
			b = append(b, byte(v)|0x80)
			v >>= 7
		}
		b = append(b, byte(v))
	}
	return b
}

// DecodeStages unpacks attempts.stages (Encode). Stages past the known ones are ignored (a later
// release may add some); a cut or overlong varint is an error.
func DecodeStages(b []byte) (Stages, error) {
	s := NoStages()
	for i := 0; len(b) > 0; i++ {
		var v uint64
		var shift uint
		for {
			if len(b) == 0 || shift > 35 {
				return s, fmt.Errorf("stages: malformed varint at stage %d", i)
			}
			c := b[0]
			b = b[1:]
			v |= uint64(c&0x7f) << shift
			shift += 7
			if c < 0x80 {
				break
			}
		}
		if i < int(NumStages) && v > 0 {
			s[i] = time.Duration(v-1) * Stage(i).unit()
		}
	}
	return s, nil
}

// StageLineWhat is the what of a worker's stage line in cortex.log:
//
//	Info:cortexq:stage_ms unpack=12 convert=3400 pack=20
//
// a protocol extension (docs/stages.md#the-stage-line): the milliseconds of each of the worker's
// stages, by name, in any order. Unknown names are skipped; older workers send no such line.
const StageLineWhat = "stage_ms"

// StageLineCategory is the category of the stage line.
const StageLineCategory = "cortexq"

// ParseStageLine reads a stage line's details into s, and reports whether it named any stage.
// Malformed fields are skipped: the line is a worker's word about itself, not a verdict.
func ParseStageLine(details string, s *Stages) bool {
	found := false
	for _, f := range strings.Fields(details) {
		name, val, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		ms, err := strconv.ParseInt(val, 10, 64)
		if err != nil || ms < 0 {
			continue
		}
		for _, st := range WorkerStages {
			if stageNames[st] == name {
				s[st] = time.Duration(min(ms, maxStageMs)) * time.Millisecond
				found = true
			}
		}
	}
	return found
}

// StageLine formats a worker's stage line (without its newline) for unpack, convert and pack;
// a negative duration is left out.
func StageLine(unpack, convert, pack time.Duration) string {
	var b strings.Builder
	b.WriteString("Info:" + StageLineCategory + ":" + StageLineWhat)
	for i, d := range []time.Duration{unpack, convert, pack} {
		if d >= 0 {
			fmt.Fprintf(&b, " %s=%d", stageNames[WorkerStages[i]], d.Milliseconds())
		}
	}
	return b.String()
}
