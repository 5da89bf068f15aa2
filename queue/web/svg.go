package web

import (
	"strconv"
	"strings"

	"github.com/cortexq/cortexq/queue/inspect"
	"github.com/cortexq/cortexq/queue/reports"
)

// sparkline is an hour of replies per minute, drawn by the server as an SVG polyline (oldest
// minute on the left).
type sparkline struct {
	Points string // the polyline's points, in a 120×24 box
	Max    int64
	Total  int64
}

const sparkW, sparkH = 120, 24

func newSparkline(minutes []int64) sparkline {
	sp := sparkline{}
	for _, n := range minutes {
		sp.Total += n
		sp.Max = max(sp.Max, n)
	}
	var pts []string
	for i := 0; i < inspect.ThroughputMinutes; i++ {
		var n int64
		if m := inspect.ThroughputMinutes - 1 - i; m < len(minutes) {
			n = minutes[m]
		}
		y := float64(sparkH - 1)
		if sp.Max > 0 {
			y = float64(sparkH-1) - float64(n)/float64(sp.Max)*float64(sparkH-2)
		}
		x := float64(i) * float64(sparkW) / float64(inspect.ThroughputMinutes-1)
		pts = append(pts, strconv.FormatFloat(x, 'f', 1, 64)+","+strconv.FormatFloat(y, 'f', 1, 64))
	}
	sp.Points = strings.Join(pts, " ")
	return sp
}

// barPart is one severity's share of a run, as a stacked bar segment.
type barPart struct {
	Class   string
	Y, H    float64
	Percent string
	Name    string
}

// runChart is the severity percentages of each run as stacked columns.
type runChart struct {
	W, H    int
	Columns []runColumn
}

type runColumn struct {
	X     int
	Label string
	Parts []barPart
}

// The run chart's bar height, column width and left margin (for the axis labels).
const chartH, colW, chartLeft = 160, 36, 40

func newRunChart(runs []reports.Run) runChart {
	c := runChart{H: chartH + 20, W: max(len(runs), 1)*colW + chartLeft + 5}
	for i, r := range runs {
		col := runColumn{X: chartLeft + i*colW, Label: "#" + strconv.FormatInt(r.ID, 10)}
		done := r.NoProblem + r.Warning + r.Error + r.Fatal
		y := float64(chartH)
		for _, p := range []struct {
			name string
			n    int64
		}{{"no_problem", r.NoProblem}, {"warning", r.Warning}, {"error", r.Error}, {"fatal", r.Fatal}} {
			if done == 0 || p.n == 0 {
				continue
			}
			h := float64(p.n) / float64(done) * chartH
			y -= h
			col.Parts = append(col.Parts, barPart{Class: "s-" + p.name, Y: y, H: h, Percent: percent(p.n, done), Name: p.name})
		}
		c.Columns = append(c.Columns, col)
	}
	return c
}
