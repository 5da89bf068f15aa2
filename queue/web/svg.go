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
	Bar     int // a column's width
	Columns []runColumn
}

type runColumn struct {
	X     int
	Label string
	Parts []barPart
}

// The run chart's bar height, least width and left margin (for the axis labels): its columns
// share at least chartMinW, each from minColW to maxColW wide.
const chartH, chartMinW, chartLeft, minColW, maxColW = 160, 640, 40, 36, 90

func newRunChart(runs []reports.Run) runChart {
	colW := min(maxColW, max(minColW, chartMinW/max(len(runs), 1)))
	c := runChart{H: chartH + 20, W: max(len(runs)*colW+chartLeft+5, chartMinW+chartLeft), Bar: colW - 8}
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

// timeChart is a bar chart of tasks per minute over time with its axes, drawn by the server:
// the overview's history (last hour by the minute, last day by the quarter hour).
type timeChart struct {
	Title    string
	W, H     int
	Bars     []timeBar
	YTicks   []chartTick // the y axis's gridlines and labels (tasks/min)
	XTicks   []chartTick // the x axis's labels (time ago)
	Left     int         // the plot's left edge
	AxisX    int         // where the y axis's labels end
	Bottom   int         // the plot's bottom edge (y)
	Right    int
	Total    int64
	PeakRate string
}

type timeBar struct {
	X, Y, W, H float64
	Title      string
}

type chartTick struct {
	X, Y  float64
	Label string
}

const timeChartW, timeChartH, timeChartLeft, timeChartBottom = 560, 150, 52, 128

// newTimeChart draws counts (index 0 the latest bucket) of bucketMinutes each as tasks per
// minute, oldest on the left; ticks label every tickEvery buckets with tickLabel(buckets ago).
func newTimeChart(title string, counts []int64, bucketMinutes int, tickEvery int, tickLabel func(int) string) timeChart {
	c := timeChart{Title: title, W: timeChartW, H: timeChartH, Left: timeChartLeft, AxisX: timeChartLeft - 4, Bottom: timeChartBottom, Right: timeChartW - 8}
	n := len(counts)
	var peak float64
	for _, v := range counts {
		c.Total += v
		peak = max(peak, float64(v)/float64(bucketMinutes))
	}
	top := niceCeil(peak)
	plotH := float64(timeChartBottom - 8)
	plotW := float64(c.Right - c.Left)
	bw := plotW / float64(max(n, 1))
	for i := range n {
		v := counts[n-1-i] // oldest first
		rate := float64(v) / float64(bucketMinutes)
		h := 0.0
		if top > 0 {
			h = rate / top * plotH
		}
		ago := n - 1 - i
		c.Bars = append(c.Bars, timeBar{X: float64(c.Left) + float64(i)*bw, Y: float64(timeChartBottom) - h, W: max(bw-1, 1), H: h,
			Title: tickLabel(ago) + ": " + commas(v) + " tasks, " + strconv.FormatFloat(rate, 'f', 1, 64) + "/min"})
	}
	for k := 0; k <= 2; k++ {
		val := top * float64(k) / 2
		c.YTicks = append(c.YTicks, chartTick{Y: float64(timeChartBottom) - plotH*float64(k)/2,
			Label: strconv.FormatFloat(val, 'f', -1, 64) + "/min"})
	}
	for ago := n - 1; ago >= 0; ago-- {
		if ago%tickEvery == 0 {
			i := n - 1 - ago
			c.XTicks = append(c.XTicks, chartTick{X: float64(c.Left) + float64(i)*bw, Label: tickLabel(ago)})
		}
	}
	c.PeakRate = strconv.FormatFloat(peak, 'f', 1, 64)
	return c
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten, at least 1 (an empty chart's scale).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := 1.0
	for p*10 <= v {
		p *= 10
	}
	for p > v*10 {
		p /= 10
	}
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
