// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"image/color"
	"os"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var (
	blue   = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	orange = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	grey   = color.RGBA{R: 0x99, G: 0x99, B: 0x99, A: 0xff}
)

// plot draws, side by side, the tasks created and Running over the burst,
// and the CDF of create → Running of the burst and of the paced phase.
func (r *Result) plot(path string) error {
	bu := r.burst
	first := slices.MinFunc(bu.sent, time.Time.Compare)

	over := plot.New()
	over.Title.Text = "Burst: tasks over time"
	over.X.Label.Text = "seconds since the first create"
	over.Y.Label.Text = "tasks"
	over.Add(plotter.NewGrid())
	if err := addLine(over, "created", grey, steps(bu.sent, first)); err != nil {
		return err
	}
	if err := addLine(over, "Running", blue, steps(bu.running, first)); err != nil {
		return err
	}
	// Top left, clear of the creates' line, which rises within seconds.
	over.Legend.Top, over.Legend.Left = true, true
	over.Legend.XOffs, over.Legend.YOffs = vg.Points(60), vg.Points(-10)

	cdf := plot.New()
	cdf.Title.Text = "create → Running, CDF"
	cdf.X.Label.Text = "milliseconds"
	cdf.Y.Label.Text = "fraction of tasks"
	cdf.Y.Min, cdf.Y.Max = 0, 1
	cdf.Add(plotter.NewGrid())
	if err := addLine(cdf, "burst", blue, cdfPoints(bu.createToRunning())); err != nil {
		return err
	}
	if len(r.paced.names) > 0 {
		if err := addLine(cdf, "paced", orange, cdfPoints(r.paced.createToRunning())); err != nil {
			return err
		}
	}
	cdf.Legend.Top, cdf.Legend.Left = false, false

	img := vgimg.New(vg.Points(1100), vg.Points(420))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Points(24), PadTop: vg.Points(8), PadBottom: vg.Points(8), PadLeft: vg.Points(8), PadRight: vg.Points(8)}
	canvases := plot.Align([][]*plot.Plot{{over, cdf}}, tiles, dc)
	over.Draw(canvases[0][0])
	cdf.Draw(canvases[0][1])

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func addLine(p *plot.Plot, name string, c color.Color, pts plotter.XYs) error {
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	l.Color = c
	l.Width = vg.Points(1.5)
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

// steps is the cumulative count of times, as a step line from origin.
func steps(times []time.Time, origin time.Time) plotter.XYs {
	s := slices.SortedFunc(slices.Values(times), time.Time.Compare)
	pts := plotter.XYs{{X: 0, Y: 0}}
	for i, t := range s {
		x := t.Sub(origin).Seconds()
		pts = append(pts, plotter.XY{X: x, Y: float64(i)}, plotter.XY{X: x, Y: float64(i + 1)})
	}
	return pts
}

// cdfPoints is the empirical CDF of ds in milliseconds.
func cdfPoints(ds []time.Duration) plotter.XYs {
	s := slices.Sorted(slices.Values(ds))
	pts := plotter.XYs{}
	for i, d := range s {
		x := ms(d)
		pts = append(pts, plotter.XY{X: x, Y: float64(i) / float64(len(s))}, plotter.XY{X: x, Y: float64(i+1) / float64(len(s))})
	}
	return pts
}
