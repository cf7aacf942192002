package spec

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prismsbi/prism/family"
)

// The framing between prism and an external simulator (docs/spec.md).
// Everything is little-endian.
//
//	hello  (prism → simulator, once):  "PRSM" u32 len, len bytes of JSON
//	batch  (prism → simulator):        "BTCH" u32 n, n×C u8 masks,
//	                                   n×P f64 parameters, n×u64 seeds
//	reply  (simulator → prism):        "OBSV" u32 n, u32 N, n×N f64
//
// The simulator exits when its stdin ends.
const (
	magicHello = "PRSM"
	magicBatch = "BTCH"
	magicReply = "OBSV"
)

// Hello is the JSON of the hello frame.
type Hello struct {
	Version int    `json:"version"`
	Family  string `json:"family"`
	// Grid is the fixed grid; null when observations have designs of
	// their own, whose covariate Covariate names: every batch then carries
	// the covariate values of each sample.
	Grid       []float64 `json:"grid"`
	Covariate  string    `json:"covariate,omitempty"`
	Components []string  `json:"components"`
	// Columns names the P parameter columns of a batch: the shared
	// parameters, the fractions ("fraction.COMPONENT"), then every
	// component's parameters ("COMPONENT.PARAM"); a column of an inactive
	// component is NaN.
	Columns []string `json:"columns"`
}

// pool runs the worker processes of an external simulator.
type pool struct {
	f       *Family
	argv    []string
	dir     string
	timeout time.Duration
	retries int
	hello   []byte
	helloMu sync.Once

	mu      sync.Mutex
	workers []*worker    // all started workers
	free    chan *worker // idle workers (nil entries: not started)
	closed  bool
}

// worker is one simulator process.
type worker struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	out    io.Closer // the read end of stdout, closed to unblock a read
	stderr *tailBuffer
	buf    []byte
	hello  bool // the hello frame was sent
}

func newPool(f *Family, argv []string, dir string, workers int, timeout time.Duration, retries int) *pool {
	p := &pool{f: f, argv: argv, dir: dir, timeout: timeout, retries: retries, free: make(chan *worker, workers)}
	for range workers {
		p.free <- nil
	}
	return p
}

// columns lists the parameter columns of a batch frame.
func (f *Family) columns() []string {
	var cols []string
	for _, p := range f.shared {
		cols = append(cols, p.Name)
	}
	for _, k := range f.layout.Simplex {
		cols = append(cols, "fraction."+f.comps[k].Name)
	}
	for _, c := range f.comps {
		for _, p := range c.Params {
			cols = append(cols, c.Name+"."+p.Name)
		}
	}
	return cols
}

func (p *pool) helloFrame() []byte {
	p.helloMu.Do(func() {
		h := Hello{Version: 1, Family: p.f.Name(), Grid: p.f.grid, Columns: p.f.columns()}
		if c := p.f.covariate; c != nil {
			h.Covariate = c.name
		}
		for _, c := range p.f.comps {
			h.Components = append(h.Components, c.Name)
		}
		js, err := json.Marshal(h)
		if err != nil {
			panic(err) // only finite numbers and strings
		}
		b := append([]byte(magicHello), 0, 0, 0, 0)
		binary.LittleEndian.PutUint32(b[4:], uint32(len(js)))
		p.hello = append(b, js...)
	})
	return p.hello
}

// start launches one worker process and sends the hello frame.
func (p *pool) start() (*worker, error) {
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Dir = p.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = time.Second
	w := &worker{cmd: cmd, stderr: &tailBuffer{max: 4096}}
	cmd.Stderr = w.stderr
	var err error
	if w.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	w.stdout, w.out = bufio.NewReaderSize(out, 1<<16), out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", strings.Join(p.argv, " "), err)
	}
	p.mu.Lock()
	p.workers = append(p.workers, w)
	p.mu.Unlock()
	return w, nil
}

// kill ends a worker's process group and reaps it.
func (p *pool) kill(w *worker) {
	if w == nil {
		return
	}
	if w.cmd.Process != nil {
		_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
	}
	_ = w.stdin.Close()
	_ = w.cmd.Wait()
	p.mu.Lock()
	for i, x := range p.workers {
		if x == w {
			p.workers = append(p.workers[:i], p.workers[i+1:]...)
			break
		}
	}
	p.mu.Unlock()
}

// close stops every worker: stdin is closed so that a well-behaved
// simulator exits; after a second the process group is killed.
func (p *pool) close() {
	p.mu.Lock()
	ws := append([]*worker(nil), p.workers...)
	p.mu.Unlock()
	for _, w := range ws {
		_ = w.stdin.Close()
		done := make(chan struct{})
		go func() { _ = w.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Second):
			p.kill(w)
			<-done
		}
	}
	p.mu.Lock()
	p.workers = nil
	p.mu.Unlock()
	// Idle slots restart their process on next use.
	n := cap(p.free)
	for len(p.free) > 0 {
		<-p.free
	}
	for range n {
		p.free <- nil
	}
}

// simulate fills the samples' observations, splitting the batch over the
// workers. With per-observation designs a batch frame holds samples of one
// design length, so runs of equal length are sent separately.
func (p *pool) simulate(samples []family.Sample, bad []bool) error {
	if p.f.covariate != nil {
		var errs []error
		for lo := 0; lo < len(samples); {
			hi := lo + 1
			for hi < len(samples) && samples[hi].Design.N == samples[lo].Design.N {
				hi++
			}
			errs = append(errs, p.simulateRun(samples[lo:hi], bad[lo:hi]))
			lo = hi
		}
		return errors.Join(errs...)
	}
	return p.simulateRun(samples, bad)
}

// simulateRun is simulate for samples of one design length.
func (p *pool) simulateRun(samples []family.Sample, bad []bool) error {
	W := cap(p.free)
	chunk := (len(samples) + W - 1) / W
	var wg sync.WaitGroup
	errs := make([]error, W)
	for c, lo := 0, 0; lo < len(samples); c, lo = c+1, lo+chunk {
		hi := min(lo+chunk, len(samples))
		wg.Add(1)
		go func(c, lo, hi int) {
			defer wg.Done()
			errs[c] = p.runChunk(samples[lo:hi], bad[lo:hi])
		}(c, lo, hi)
	}
	wg.Wait()
	return errors.Join(errs...)
}

// runChunk sends one chunk to an idle worker, restarting the worker and
// resending up to retries times when it crashes, hangs or replies
// malformed data.
func (p *pool) runChunk(samples []family.Sample, bad []bool) error {
	var errs []string
	for attempt := 0; attempt <= p.retries; attempt++ {
		w := <-p.free
		if w == nil {
			var err error
			if w, err = p.start(); err != nil {
				p.free <- nil
				return p.describe(samples, attempt+1, err.Error())
			}
		}
		err := p.exchange(w, samples, bad)
		if err == nil {
			p.free <- w
			return nil
		}
		p.kill(w)
		p.free <- nil
		msg := err.Error()
		if st := w.cmd.ProcessState; st != nil && !strings.Contains(msg, "timeout") {
			msg += "; the process ended with " + st.String()
		}
		if tail := strings.TrimSpace(w.stderr.String()); tail != "" {
			msg += "; simulator stderr: " + lastLines(tail, 5)
		}
		errs = append(errs, fmt.Sprintf("attempt %d: %s", attempt+1, msg))
	}
	return p.describe(samples, p.retries+1, strings.Join(errs, "; "))
}

func (p *pool) describe(samples []family.Sample, attempts int, msg string) error {
	s := &samples[0]
	return fmt.Errorf("spec: %s: external simulator %q failed on samples %d–%d after %d attempt(s) (first sample: mask %s, %s): %s",
		p.f.Name(), strings.Join(p.argv, " "), s.Index, samples[len(samples)-1].Index, attempts,
		family.MaskString(s.Mask), family.DescribeParams(p.f, s.Theta, s.Mask), msg)
}

// exchange writes a batch frame and reads the reply, within the timeout.
func (p *pool) exchange(w *worker, samples []family.Sample, bad []bool) error {
	frame := p.batchFrame(w, samples)
	done := make(chan error, 1)
	go func() { done <- p.roundTrip(w, frame, samples, bad) }()
	timer := time.NewTimer(p.timeout)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		if w.cmd.Process != nil {
			_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
		}
		// The killed process's pipes close; should a descendant that left
		// the process group keep stdout open, closing our end unblocks
		// the read.
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			_ = w.out.Close()
			<-done
		}
		return fmt.Errorf("no reply within the timeout of %s (hung simulator killed)", p.timeout)
	}
}

// batchFrame encodes the batch (masks, natural parameters, seeds).
func (p *pool) batchFrame(w *worker, samples []family.Sample) []byte {
	f := p.f
	C := len(f.comps)
	n := len(samples)
	b := w.buf[:0]
	if !w.hello {
		b = append(b, p.helloFrame()...)
		w.hello = true
	}
	b = append(b, magicBatch...)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	for i := range samples {
		for k := 0; k < C; k++ {
			if samples[i].Mask[k] {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
		}
	}
	env := make([]float64, f.envLen)
	S := len(f.shared)
	for i := range samples {
		s := &samples[i]
		f.fillEnv(s.Theta, s.Mask, env)
		vals := env[2 : 2+S]
		for _, v := range vals {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
		for _, k := range f.layout.Simplex {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(env[2+S+k]))
		}
		for _, v := range env[2+S+C:] {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
	}
	for i := range samples {
		b = binary.LittleEndian.AppendUint64(b, samples[i].SimSeed)
	}
	if f.covariate != nil {
		N := samples[0].Design.N
		b = binary.LittleEndian.AppendUint32(b, uint32(N))
		for i := range samples {
			d := &samples[i].Design
			for j := range N {
				b = binary.LittleEndian.AppendUint64(b, math.Float64bits(d.Cov[j*d.CovDim]))
			}
		}
	}
	w.buf = b
	return b
}

// roundTrip writes frame and decodes the reply into the samples.
func (p *pool) roundTrip(w *worker, frame []byte, samples []family.Sample, bad []bool) error {
	if _, err := w.stdin.Write(frame); err != nil {
		return fmt.Errorf("writing the batch: %w (%s)", err, exitState(w))
	}
	var head [12]byte
	if n, err := io.ReadFull(w.stdout, head[:]); err != nil {
		if n == 0 && errors.Is(err, io.EOF) {
			return fmt.Errorf("no reply: the simulator closed its stdout (%s)", exitState(w))
		}
		return fmt.Errorf("reading the reply header: got %d of 12 bytes (%v; %s)", n, err, exitState(w))
	}
	if string(head[:4]) != magicReply {
		return fmt.Errorf("the reply starts with %q, want %q (is the simulator printing text to stdout? write messages to stderr)", head[:4], magicReply)
	}
	n := int(binary.LittleEndian.Uint32(head[4:]))
	N := int(binary.LittleEndian.Uint32(head[8:]))
	if n != len(samples) {
		return fmt.Errorf("the reply holds %d observations for a batch of %d", n, len(samples))
	}
	if want := samples[0].Design.N; N != want {
		return fmt.Errorf("the simulator wrote %d values per observation, want %d (the design)", N, want)
	}
	need := n * N * 8
	if cap(w.buf) < need {
		w.buf = make([]byte, need)
	}
	body := w.buf[:need]
	if got, err := io.ReadFull(w.stdout, body); err != nil {
		return fmt.Errorf("short write: the reply ended after %d of %d bytes (%d of %d values; %s)", got, need, got/8, n*N, exitState(w))
	}
	for i := range samples {
		x := samples[i].X[:N]
		for j := range x {
			x[j] = math.Float64frombits(binary.LittleEndian.Uint64(body[(i*N+j)*8:]))
		}
		bad[i] = !finite(x)
	}
	return nil
}

// exitState says what is known of a worker's process without waiting.
func exitState(w *worker) string {
	if w.cmd.ProcessState != nil {
		return "the simulator exited: " + w.cmd.ProcessState.String()
	}
	return "the simulator crashed, exited or closed its output"
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
