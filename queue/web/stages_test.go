package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/web"
)

// TestWebRunTime: the time view of a run shows its stages, the bottleneck and the slowest tasks
// linked to their pages; its JSON gives the same figures in milliseconds.
func TestWebRunTime(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	stages := func(worker, convert, claim time.Duration) []byte {
		st := queue.NoStages()
		st[queue.StageTodo], st[queue.StageReserved], st[queue.StageSource] = time.Second, 2*time.Millisecond, 0
		st[queue.StageWorker], st[queue.StageConvert], st[queue.StageUnpack], st[queue.StagePack] = worker, convert, 0, 0
		st[queue.StageWrite], st[queue.StageClaimWait], st[queue.StageClaim] = time.Millisecond, time.Millisecond, claim
		return st.Encode()
	}
	f.exec(`UPDATE attempts SET stages = $2, answered_at = now() WHERE task_id = $1`, f.ok, stages(900*time.Millisecond, 800*time.Millisecond, 10*time.Millisecond))
	f.exec(`UPDATE attempts SET stages = $2, answered_at = now() WHERE task_id = $1`, f.bad, stages(1500*time.Millisecond, 1400*time.Millisecond, 5*time.Millisecond))
	c := f.client()
	page := c.get("/runs/time?corpus=papers&service=tex_to_html")
	require.Equal(t, http.StatusOK, page.code, page.body)
	require.Contains(t, page.body, "bottleneck: convert")
	require.Contains(t, page.body, "<td>convert</td><td>2</td>")
	require.Regexp(t, fmt.Sprintf(`(?s)<a href="/task/%d">%d</a>.*<a href="/task/%d">%d</a>`, f.bad, f.bad, f.ok, f.ok), page.body,
		"the slowest first, linked to their pages")
	task := c.get(fmt.Sprintf("/task/%d", f.bad)).body
	require.Contains(t, task, "worker 1.5s, transfer 100ms, write 1ms, claim_wait 1ms, claim 5ms, unpack 0s, convert 1.4s, pack 0s",
		"the task page shows its attempt's stages")
	runs := c.get("/runs?corpus=papers&service=tex_to_html").body
	require.Contains(t, runs, `href="/runs/time?corpus=papers&amp;run=`, "each run links its time view")

	r := c.get("/runs/time.json?corpus=papers&service=tex_to_html&slowest=1")
	require.Equal(t, http.StatusOK, r.code, r.body)
	var got struct {
		Run     int64 `json:"run"`
		Summary struct {
			Tasks      int    `json:"tasks"`
			Bottleneck string `json:"bottleneck"`
		} `json:"summary"`
		Slowest []struct {
			TaskID  int64              `json:"task_id"`
			TotalMs float64            `json:"total_ms"`
			Stages  map[string]float64 `json:"stages"`
		} `json:"slowest"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.body), &got))
	require.NotZero(t, got.Run)
	require.Equal(t, 2, got.Summary.Tasks)
	require.Equal(t, "convert", got.Summary.Bottleneck)
	require.Len(t, got.Slowest, 1)
	require.Equal(t, f.bad, got.Slowest[0].TaskID)
	require.InDelta(t, 1507, got.Slowest[0].TotalMs, 0.001, "source, worker, write, claim_wait and claim")
	require.InDelta(t, 100, got.Slowest[0].Stages["transfer"], 0.001)

	service := c.get("/runs/time.json?service=tex_to_html")
	require.Equal(t, http.StatusOK, service.code, "the service over all corpora: %s", service.body)

	// The API's twins answer the same figures, in the spec's shape (c.api validates them).
	a := c.api("GET", "/api/v1/corpora/papers/services/tex_to_html/stages?slowest=1", "")
	require.Equal(t, http.StatusOK, a.code, a.body)
	require.JSONEq(t, r.body, a.body, "the API answers what the view's JSON does")
	a = c.api("GET", "/api/v1/services/tex_to_html/stages", "")
	require.Equal(t, http.StatusOK, a.code, a.body)
	require.JSONEq(t, service.body, a.body)
	for path, code := range map[string]int{
		"/api/v1/services/nope/stages":                                  http.StatusNotFound,
		"/api/v1/corpora/papers/services/tex_to_html/stages?run=999999": http.StatusNotFound,
		"/api/v1/corpora/papers/services/tex_to_html/stages?slowest=-1": http.StatusUnprocessableEntity,
		"/api/v1/corpora/nope/services/tex_to_html/stages":              http.StatusNotFound,
	} {
		require.Equal(t, code, c.api("GET", path, "").code, path)
	}
	for path, code := range map[string]int{
		"/runs/time":              http.StatusBadRequest,
		"/runs/time?service=nope": http.StatusNotFound,
		"/runs/time?corpus=papers&service=tex_to_html&run=999999": http.StatusNotFound,
		"/runs/time?corpus=papers&service=tex_to_html&run=x":      http.StatusBadRequest,
		"/runs/time?corpus=papers&service=tex_to_html&slowest=-1": http.StatusBadRequest,
	} {
		require.Equal(t, code, c.get(path).code, path)
	}
}
