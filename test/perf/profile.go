package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// managerPprofAddress is where the manager serves pprof when the run
// profiles (BENCH_PROFILE).
const managerPprofAddress = "127.0.0.1:6065"

// profiles are the CPU profiles of one teardown, taken over a fixed window
// from the clusters' deletion on: kube-apiserver's from its /debug/pprof
// (as the admin user), the manager's from its pprof address. The window
// is fixed because a CPU profile is asked for by length; it should be
// longer than the teardown, and the samples count CPU, not wall time.
type profiles struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []string
}

// startProfiles starts the profiles of a teardown, named by the
// case and contender; manager says whether the contender is the manager.
func startProfiles(ctx context.Context, k knobs, admin *rest.Config, name string, manager bool) (*profiles, error) {
	p := &profiles{}
	if k.profileDir == "" {
		return p, nil
	}
	if err := os.MkdirAll(k.profileDir, 0o755); err != nil {
		return nil, err
	}
	hc, err := rest.HTTPClientFor(admin)
	if err != nil {
		return nil, err
	}
	seconds := int(k.profileWindow / time.Second)
	p.fetch(ctx, hc, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimSuffix(admin.Host, "/"), seconds),
		filepath.Join(k.profileDir, name+"-kube-apiserver.pprof"))
	if manager {
		p.fetch(ctx, http.DefaultClient, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", managerPprofAddress, seconds),
			filepath.Join(k.profileDir, name+"-manager.pprof"))
	}
	return p, nil
}

func (p *profiles) fetch(ctx context.Context, hc *http.Client, url, file string) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		if err := download(ctx, hc, url, file); err != nil {
			p.mu.Lock()
			p.errs = append(p.errs, fmt.Sprintf("%s: %v", filepath.Base(file), err))
			p.mu.Unlock()
		}
	}()
}

func download(ctx context.Context, hc *http.Client, url, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// wait waits for the profiles and says which could not be taken.
func (p *profiles) wait() error {
	p.wg.Wait()
	if len(p.errs) > 0 {
		return fmt.Errorf("profiles not taken: %s", strings.Join(p.errs, "; "))
	}
	return nil
}
