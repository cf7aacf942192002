// Package progress draws the progress bar of prism's long-running
// commands on a terminal or a log:
//
//	dmri fit: [#####.........................]  18% 400/2218 voxels, 12.3 voxels/s, elapsed 32s, ETA 2m28s
//
// On a terminal the line is redrawn in place; otherwise (a log file, a
// pipe, a batch system) one line is written every 10 % and at least every
// 30 s. A run that continues an interrupted one starts from its resumed
// count, and its rate and ETA count only the work done in this run.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Reporter receives the number of items done so far (including the
// resumed ones) and is finished once at the end.
type Reporter interface {
	Update(done int)
	Finish()
}

// Start begins reporting on a task of total items of which resumed are
// already done; label names the task ("dmri fit"). A nil Start reports
// nothing (see Begin).
type Start func(label string, total, resumed int) Reporter

// Begin calls start, or returns a Reporter that does nothing when start is
// nil.
func Begin(start Start, label string, total, resumed int) Reporter {
	if start == nil {
		return nop{}
	}
	return start(label, total, resumed)
}

type nop struct{}

func (nop) Update(int) {}
func (nop) Finish()    {}

// To returns a Start that draws bars on w, redrawn in place when w is a
// terminal, counting items of the given unit ("voxels").
func To(w io.Writer, unit string) Start {
	tty := IsTerminal(w)
	return func(label string, total, resumed int) Reporter {
		return New(w, tty, label, unit, total, resumed, time.Now())
	}
}

// Func returns a Start that passes every update to f (done, total).
func Func(f func(done, total int)) Start {
	return func(_ string, total, _ int) Reporter { return funcReporter{f, total} }
}

type funcReporter struct {
	f     func(done, total int)
	total int
}

func (r funcReporter) Update(done int) { r.f(done, r.total) }
func (funcReporter) Finish()           {}

// IsTerminal reports whether w is a character device (a terminal).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Bar is a progress bar; its methods are safe for concurrent use.
type Bar struct {
	mu         sync.Mutex
	w          io.Writer
	tty        bool
	label      string
	unit       string
	total      int
	resumed    int
	start      time.Time
	now        func() time.Time
	lastLine   time.Time
	lastDecile int
	drawn      bool
}

// New returns a bar for total items of unit, resumed of them done before
// start; tty selects redrawing in place.
func New(w io.Writer, tty bool, label, unit string, total, resumed int, start time.Time) *Bar {
	return &Bar{w: w, tty: tty, label: label, unit: unit, total: total, resumed: resumed, start: start, now: time.Now, lastDecile: -1}
}

// Update reports done items in all (resumed ones included).
func (p *Bar) Update(done int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.total <= 0 {
		return
	}
	now := p.now()
	el := now.Sub(p.start)
	rate := float64(done-p.resumed) / el.Seconds()
	eta := "?"
	if rate > 0 {
		eta = (time.Duration(float64(p.total-done)/rate) * time.Second).Round(time.Second).String()
	}
	const width = 30
	fill := min(max(done*width/p.total, 0), width)
	line := fmt.Sprintf("%s: [%s%s] %3d%% %d/%d %s, %.1f %s/s, elapsed %s, ETA %s", p.label,
		strings.Repeat("#", fill), strings.Repeat(".", width-fill), done*100/p.total, done, p.total, p.unit,
		rate, p.unit, el.Round(time.Second), eta)
	if p.tty {
		fmt.Fprintf(p.w, "\r%s\x1b[K", line)
		p.drawn = true
		return
	}
	decile := done * 10 / p.total
	if decile > p.lastDecile || now.Sub(p.lastLine) > 30*time.Second || done == p.total {
		p.lastDecile, p.lastLine = decile, now
		fmt.Fprintln(p.w, line)
	}
}

// Finish ends the line of a bar drawn in place.
func (p *Bar) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}
