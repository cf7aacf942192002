package view

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prismsbi/prism/family"
	"github.com/prismsbi/prism/obsfile"
)

//go:embed assets
var assets embed.FS

// DefaultMaxUpload is the default limit of a request body (an uploaded
// observation): 1 MiB, a few hundred thousand values.
const DefaultMaxUpload = 1 << 20

// Config configures the server.
type Config struct {
	// Grid and DMRI are the explorers shown; at least one is needed.
	Grid *Grid
	DMRI *DMRI
	// MaxUpload limits request bodies, in bytes (0: DefaultMaxUpload).
	MaxUpload int64
	// Candidates, if not nil, are kept for uploaded observations (the
	// models of `--candidates`); nil rediscovers them per observation.
	Candidates [][]bool
	// Logf, if not nil, receives one line per failed request.
	Logf func(format string, args ...any)
}

// Server is the web app: an http.Handler over the explorers.
type Server struct {
	mu   sync.RWMutex // guards grid (replaced by uploads)
	grid *Grid
	dmri *DMRI
	cfg  Config
	mux  *http.ServeMux
}

// New returns the server of the explorers in cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Grid == nil && cfg.DMRI == nil {
		return nil, errors.New("view: nothing to show: give a grid-family observation or a dMRI scan")
	}
	if cfg.MaxUpload <= 0 {
		cfg.MaxUpload = DefaultMaxUpload
	}
	s := &Server{grid: cfg.Grid, dmri: cfg.DMRI, cfg: cfg, mux: http.NewServeMux()}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, fmt.Errorf("view: %w", err)
	}
	s.mux.Handle("GET /", http.FileServerFS(static))
	s.mux.HandleFunc("GET /api/info", s.info)
	s.mux.HandleFunc("GET /api/grid/update", s.gridUpdate)
	s.mux.HandleFunc("GET /api/grid/marginals", s.gridMarginals)
	s.mux.HandleFunc("GET /api/grid/candidates", s.gridCandidates)
	s.mux.HandleFunc("POST /api/grid/observation", s.gridObservation)
	s.mux.HandleFunc("GET /api/dmri/slice", s.dmriSlice)
	s.mux.HandleFunc("POST /api/dmri/refit", s.dmriRefit)
	s.mux.HandleFunc("GET /api/dmri/voxel", s.dmriVoxel)
	return s, nil
}

// ServeHTTP limits request bodies and answers only requests addressed to
// the server by a loopback name or a literal IP address, so that a web
// page elsewhere cannot reach it through a rebound DNS name; POSTs from
// another origin are refused.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host != "localhost" && net.ParseIP(host) == nil {
		http.Error(w, "prism view answers only requests to localhost or an IP address", http.StatusForbidden)
		return
	}
	// A browser names the page that sends a POST in Origin: refuse those
	// of other sites (they could start refits or replace the data).
	if o := r.Header.Get("Origin"); r.Method != http.MethodGet && o != "" {
		if u, err := url.Parse(o); err != nil || u.Host != r.Host {
			http.Error(w, "prism view accepts changes only from its own page", http.StatusForbidden)
			return
		}
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxUpload)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	s.mux.ServeHTTP(w, r)
}

// Serve answers requests on ln until ctx is cancelled, then shuts down:
// it waits up to 5 s for requests in flight, then closes their
// connections (a refit still running is abandoned; nothing is written).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("view: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		if !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("view: shutdown: %w", err)
		}
		srv.Close()
	}
	<-done
	return nil
}

// currentGrid returns the grid explorer (nil without one).
func (s *Server) currentGrid() *Grid {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.grid
}

// info describes what the page shows.
func (s *Server) info(w http.ResponseWriter, r *http.Request) {
	type gridInfo struct {
		Family     string    `json:"family"`
		Data       string    `json:"data"`
		Components []string  `json:"components"`
		Candidates int       `json:"candidates"`
		TrueMask   string    `json:"true_mask,omitempty"`
		TrueLabel  string    `json:"true_label,omitempty"`
		Settings   any       `json:"settings"`
		MaxUpload  int64     `json:"max_upload"`
		X          []float64 `json:"x"`
	}
	var out struct {
		Grid *gridInfo `json:"grid,omitempty"`
		DMRI *DMRIInfo `json:"dmri,omitempty"`
	}
	if g := s.currentGrid(); g != nil {
		gi := &gridInfo{Family: g.fam.Name(), Data: g.name, Candidates: len(g.cands), Settings: g.set, MaxUpload: s.cfg.MaxUpload, X: gridOf(g.obs.Design)}
		for _, c := range g.fam.Components() {
			gi.Components = append(gi.Components, c.Name)
		}
		if g.truth != nil {
			gi.TrueMask, gi.TrueLabel = family.MaskString(g.truth), family.MaskLabel(g.fam, g.truth)
		}
		out.Grid = gi
	}
	if s.dmri != nil {
		inf := s.dmri.Info()
		out.DMRI = &inf
	}
	writeJSON(w, out)
}

func (s *Server) gridUpdate(w http.ResponseWriter, r *http.Request) {
	g := s.currentGrid()
	if g == nil {
		s.fail(w, r, http.StatusNotFound, errors.New("no grid-family data loaded"))
		return
	}
	lambda, err := floatParam(r, "lambda")
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	var local []bool
	if m := r.URL.Query().Get("local"); m != "" {
		if local, err = family.ParseMask(m, len(g.fam.Components())); err != nil {
			s.fail(w, r, http.StatusBadRequest, err)
			return
		}
	}
	t := time.Now()
	u, err := g.Update(lambda, local)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	u.Seconds = time.Since(t).Seconds()
	writeJSON(w, u)
}

func (s *Server) gridMarginals(w http.ResponseWriter, r *http.Request) {
	g := s.currentGrid()
	if g == nil {
		s.fail(w, r, http.StatusNotFound, errors.New("no grid-family data loaded"))
		return
	}
	mask, err := family.ParseMask(r.URL.Query().Get("mask"), len(g.fam.Components()))
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	ms, err := g.Marginals(mask)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	writeJSON(w, struct {
		Mask      string     `json:"mask"`
		Label     string     `json:"label"`
		Marginals []Marginal `json:"marginals"`
	}{family.MaskString(mask), family.MaskLabel(g.fam, mask), ms})
}

// gridCandidates lists the ranked models, one 0/1 mask per line: the
// file `prism select --candidates` takes.
func (s *Server) gridCandidates(w http.ResponseWriter, r *http.Request) {
	g := s.currentGrid()
	if g == nil {
		s.fail(w, r, http.StatusNotFound, errors.New("no grid-family data loaded"))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, strings.Join(g.Candidates(), "\n")+"\n")
}

// gridObservation replaces the observation by the uploaded one (a JSON
// line {"x": […]} or a CSV row on the family's grid).
func (s *Server) gridObservation(w http.ResponseWriter, r *http.Request) {
	g := s.currentGrid()
	if g == nil {
		s.fail(w, r, http.StatusNotFound, errors.New("no grid-family data loaded"))
		return
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.fail(w, r, http.StatusRequestEntityTooLarge, fmt.Errorf("upload larger than %d bytes", tooBig.Limit))
			return
		}
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	name := r.URL.Query().Get("name")
	if name == "" {
		name = "upload"
	}
	obs, truth, err := obsfile.ParseOne(name, b, g.fam)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	ng, err := g.WithObservation(obs, truth, s.cfg.Candidates, name)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	s.mu.Lock()
	s.grid = ng
	s.mu.Unlock()
	writeJSON(w, struct {
		Data       string `json:"data"`
		Candidates int    `json:"candidates"`
	}{name, len(ng.cands)})
}

func (s *Server) dmriSlice(w http.ResponseWriter, r *http.Request) {
	if s.dmri == nil {
		s.fail(w, r, http.StatusNotFound, errors.New("no dMRI scan loaded"))
		return
	}
	ints, err := intParams(r, "axis", "index")
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	img, err := s.dmri.Slice(r.URL.Query().Get("map"), ints[0], ints[1])
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	if err := png.Encode(w, img); err != nil {
		s.logf("view: slice: %v", err)
	}
}

// dmriRefit refits the three slices through voxel (x, y, z) at λ.
func (s *Server) dmriRefit(w http.ResponseWriter, r *http.Request) {
	if s.dmri == nil {
		s.fail(w, r, http.StatusNotFound, errors.New("no dMRI scan loaded"))
		return
	}
	lambda, ints, err := voxelParams(r)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	res, err := s.dmri.Refit(lambda, ints[0], ints[1], ints[2], []int{Sagittal, Coronal, Axial})
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	writeJSON(w, res)
}

func (s *Server) dmriVoxel(w http.ResponseWriter, r *http.Request) {
	if s.dmri == nil {
		s.fail(w, r, http.StatusNotFound, errors.New("no dMRI scan loaded"))
		return
	}
	lambda, ints, err := voxelParams(r)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	v, err := s.dmri.Voxel(lambda, ints[0], ints[1], ints[2])
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	writeJSON(w, v)
}

// fail answers with the error as plain text and logs it.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, code int, err error) {
	s.logf("view: %s %s: %v", r.Method, r.URL.Path, err)
	http.Error(w, err.Error(), code)
}

func (s *Server) logf(format string, args ...any) {
	if s.cfg.Logf != nil {
		s.cfg.Logf(format, args...)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Write(b)
}

func floatParam(r *http.Request, name string) (float64, error) {
	v, err := strconv.ParseFloat(r.URL.Query().Get(name), 64)
	if err != nil {
		return 0, fmt.Errorf("parameter %s: %w", name, err)
	}
	return v, nil
}

func intParams(r *http.Request, names ...string) ([]int, error) {
	out := make([]int, len(names))
	for k, name := range names {
		v, err := strconv.Atoi(r.URL.Query().Get(name))
		if err != nil {
			return nil, fmt.Errorf("parameter %s: %w", name, err)
		}
		out[k] = v
	}
	return out, nil
}

// voxelParams reads the λ and the voxel (x, y, z) of a dMRI request.
func voxelParams(r *http.Request) (float64, []int, error) {
	lambda, err := floatParam(r, "lambda")
	if err != nil {
		return 0, nil, err
	}
	ints, err := intParams(r, "x", "y", "z")
	if err != nil {
		return 0, nil, err
	}
	return lambda, ints, nil
}
