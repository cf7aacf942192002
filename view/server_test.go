package view

import (
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// testServer serves a lingauss grid explorer.
func testServer(t *testing.T, maxUpload int64) (*httptest.Server, *Grid) {
	t.Helper()
	p, obs, truth := lingauss(t)
	g, err := NewGrid(p, obs, truth, allMasks(p.Family()), "sim", smallSettings())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Grid: g, MaxUpload: maxUpload, Candidates: allMasks(p.Family())})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts, g
}

func get(t *testing.T, ts *httptest.Server, path, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", ts.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServerRoutes: the page and its assets, the JSON answers, and clear
// 4xx errors for bad requests.
func TestServerRoutes(t *testing.T) {
	ts, g := testServer(t, 0)
	for _, c := range []struct {
		path string
		code int
		want string
	}{
		{"/", 200, "<title>prism view</title>"},
		{"/app.js", 200, "/api/grid/update"},
		{"/style.css", 200, "body"},
		{"/api/info", 200, `"family":"lingauss-k6"`},
		{"/api/grid/update?lambda=0.4", 200, `"top":`},
		{"/api/grid/update?lambda=x", 400, "lambda"},
		{"/api/grid/update?lambda=1.2", 400, "outside [0, 1]"},
		{"/api/grid/update?lambda=0.4&local=01", 400, "mask"},
		{"/api/grid/marginals?mask=" + g.Candidates()[0], 200, `"marginals":`},
		{"/api/grid/candidates", 200, g.Candidates()[0] + "\n"},
		{"/api/dmri/slice?map=fa&axis=2&index=0", 404, "no dMRI scan"},
		{"/api/dmri/voxel?lambda=0.3&x=1&y=1&z=1", 404, "no dMRI scan"},
		{"/missing.html", 404, ""},
		{"/../view.go", 404, ""},
	} {
		code, body := get(t, ts, c.path, "")
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("GET %s: %d %.80q, want %d with %q", c.path, code, body, c.code, c.want)
		}
	}
	var u Update
	_, body := get(t, ts, "/api/grid/update?lambda=0.4", "")
	if err := json.Unmarshal([]byte(body), &u); err != nil || u.Lambda != 0.4 || len(u.Top) == 0 {
		t.Errorf("update: %v %+v", err, u)
	}
}

// TestServerHost: requests must name the server by a loopback name or an
// IP address (a rebound DNS name is refused).
func TestServerHost(t *testing.T) {
	ts, _ := testServer(t, 0)
	for host, want := range map[string]int{"localhost:8080": 200, "127.0.0.1": 200, "[::1]:80": 200, "evil.example": 403, "evil.example:8080": 403} {
		if code, _ := get(t, ts, "/api/info", host); code != want {
			t.Errorf("Host %s: %d, want %d", host, code, want)
		}
	}
}

// TestServerOrigin: a POST from another site's page is refused.
func TestServerOrigin(t *testing.T) {
	ts, _ := testServer(t, 0)
	for origin, want := range map[string]int{"": 400, ts.URL: 400, "http://evil.example": 403} {
		req, err := http.NewRequest("POST", ts.URL+"/api/grid/observation", strings.NewReader("1,2"))
		if err != nil {
			t.Fatal(err)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// 400: accepted and parsed (two values are too few).
		if resp.StatusCode != want {
			t.Errorf("Origin %q: %d, want %d", origin, resp.StatusCode, want)
		}
	}
}

// TestServerUpload: an uploaded observation replaces the data; bodies over
// the limit get 413 and leave the data alone; bad files get 400 naming the
// file.
func TestServerUpload(t *testing.T) {
	ts, g := testServer(t, 4096)
	post := func(name, body string) (int, string) {
		resp, err := ts.Client().Post(ts.URL+"/api/grid/observation?name="+name, "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	vals := make([]string, g.obs.Design.N)
	for j := range vals {
		vals[j] = "0.25"
	}
	if code, body := post("big.csv", strings.Repeat("1,", 5000)); code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "4096") {
		t.Errorf("oversized upload: %d %s", code, body)
	}
	if code, body := post("short.csv", "1,2"); code != 400 || !strings.Contains(body, "short.csv") {
		t.Errorf("short upload: %d %s", code, body)
	}
	if _, body := get(t, ts, "/api/info", ""); !strings.Contains(body, `"data":"sim"`) {
		t.Errorf("a refused upload changed the data: %s", body)
	}
	if code, body := post("mine.csv", strings.Join(vals, ",")); code != 200 {
		t.Fatalf("upload: %d %s", code, body)
	}
	if _, body := get(t, ts, "/api/info", ""); !strings.Contains(body, `"data":"mine.csv"`) {
		t.Errorf("upload not in use: %s", body)
	}
	if code, _ := get(t, ts, "/api/grid/update?lambda=0.3", ""); code != 200 {
		t.Errorf("update after upload: %d", code)
	}
}

// TestAssetsSelfContained: the page loads nothing from elsewhere (no
// CDN, no absolute URL).
func TestAssetsSelfContained(t *testing.T) {
	err := fs.WalkDir(assets, "assets", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(path)
		if err != nil {
			return err
		}
		for _, bad := range []string{"http://", "https://", "//cdn", "@import"} {
			if strings.Contains(string(b), bad) {
				t.Errorf("%s contains %q", path, bad)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestNewNeedsAnExplorer(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("a server with nothing to show")
	}
}
