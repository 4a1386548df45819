package main

import (
	"fmt"
	"math"
	"strings"
)

// series is one line of a panel.
type series struct {
	name, color string
	dashed      bool
	ys          []float64
}

// panel geometry, in SVG units.
const (
	chartW, chartH = 1040, 420
	panelW, panelH = 400, 280
	padL, padT     = 70, 50
)

// chart draws the spread runs as an SVG: GRANTED/s (left) and latency (right,
// logarithmic) against concurrency (logarithmic).
func (res *results) chart() string {
	var xs []float64
	one, many := series{name: "1 promotion", color: "#d62728"}, series{name: "64 promotions / 16 shards", color: "#1f77b4"}
	lat := []series{
		{name: "p50, 1 promotion", color: "#d62728", dashed: true}, {name: "p99, 1 promotion", color: "#d62728"},
		{name: "p50, 64 promotions", color: "#1f77b4", dashed: true}, {name: "p99, 64 promotions", color: "#1f77b4"},
	}
	for _, s := range res.Spread {
		xs = append(xs, float64(s.Conc))
		one.ys = append(one.ys, s.One.Granted)
		many.ys = append(many.ys, s.Many.Granted)
		lat[0].ys, lat[1].ys = append(lat[0].ys, s.One.P50), append(lat[1].ys, s.One.P99)
		lat[2].ys, lat[3].ys = append(lat[2].ys, s.Many.P50), append(lat[3].ys, s.Many.P99)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", chartW, chartH, chartW, chartH)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14" font-weight="bold">grab-service on %d cores, shared with the load generator and every dependency (%s)</text>`+"\n",
		padL, res.Machine.Cores, res.Started.Format("2006-01-02"))
	if len(xs) == 0 {
		b.WriteString(`<text x="70" y="80">no spread runs in this report</text></svg>` + "\n")
		return b.String()
	}
	drawPanel(&b, padL, padT, "GRANTED/s", false, xs, []series{one, many})
	drawPanel(&b, padL+panelW+130, padT, "latency ms (log scale)", true, xs, lat)
	b.WriteString("</svg>\n")
	return b.String()
}

func drawPanel(b *strings.Builder, x0, y0 int, title string, logY bool, xs []float64, ss []series) {
	lo, hi := math.Inf(1), 0.0
	for _, s := range ss {
		for _, y := range s.ys {
			if y > 0 {
				lo, hi = math.Min(lo, y), math.Max(hi, y)
			}
		}
	}
	if hi == 0 {
		hi, lo = 1, 0.1
	}
	ymin, ymax := 0.0, niceCeil(hi*1.05)
	if logY {
		ymin, ymax = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
	}
	xl, xh := math.Log2(xs[0]), math.Log2(xs[len(xs)-1])
	if xh == xl {
		xh = xl + 1
	}
	px := func(x float64) float64 { return float64(x0) + (math.Log2(x)-xl)/(xh-xl)*panelW }
	py := func(y float64) float64 {
		f := (y - ymin) / (ymax - ymin)
		if logY {
			f = (math.Log10(math.Max(y, ymin)) - math.Log10(ymin)) / (math.Log10(ymax) - math.Log10(ymin))
		}
		return float64(y0+panelH) - f*panelH
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", x0, y0-8, title)
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", x0, y0, panelW, panelH)
	for _, x := range xs {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/><text x="%.1f" y="%d" text-anchor="middle">%g</text>`+"\n",
			px(x), y0, px(x), y0+panelH, px(x), y0+panelH+16, x)
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">concurrency (requests in flight)</text>`+"\n", x0+panelW/2, y0+panelH+34)
	for _, t := range yTicks(ymin, ymax, logY) {
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n",
			x0, py(t), x0+panelW, py(t), x0-6, py(t)+4, tickText(t))
	}
	for i, s := range ss {
		var pts []string
		for k, y := range s.ys {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(xs[k]), py(y)))
		}
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="5,4"`
		}
		fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), s.color, dash)
		ly := y0 + panelH + 52 + 16*(i/2)
		lx := x0 + (i%2)*(panelW/2)
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/><text x="%d" y="%d">%s</text>`+"\n",
			lx, ly-4, lx+24, ly-4, s.color, dash, lx+30, ly, s.name)
	}
}

func yTicks(lo, hi float64, logY bool) []float64 {
	var out []float64
	if logY {
		for t := lo; t <= hi*1.0001; t *= 10 {
			out = append(out, t)
		}
		return out
	}
	step := hi / 5
	for t := 0.0; t <= hi*1.0001; t += step {
		out = append(out, t)
	}
	return out
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func tickText(v float64) string {
	switch {
	case v >= 1000:
		return num(v)
	case v >= 1:
		return fmt.Sprintf("%g", math.Round(v*10)/10)
	}
	return fmt.Sprintf("%g", v)
}
