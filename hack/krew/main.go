// Command krew writes the plugin's krew manifest for a release: the
// template plugins/krew/cleanup.yaml with the sha256 of each archive it
// names, read from the folder the archives were built in.
//
//	go run ./hack/krew -manifest plugins/krew/cleanup.yaml -dist dist -out dist/krew/cleanup.yaml
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

func main() {
	manifest := flag.String("manifest", "plugins/krew/cleanup.yaml", "The manifest template.")
	dist := flag.String("dist", "dist", "The folder that holds the archives the manifest names.")
	out := flag.String("out", "dist/krew/cleanup.yaml", "Where to write the manifest.")
	flag.Parse()
	if err := write(*manifest, *dist, *out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func write(manifest, dist, out string) error {
	raw, err := os.ReadFile(manifest)
	if err != nil {
		return err
	}
	filled, err := fill(string(raw), func(name string) (string, error) { return fileSHA256(filepath.Join(dist, name)) })
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(out, []byte(filled), 0o644)
}

// fill sets the sha256 line that follows each uri line to the sum of the
// archive the uri names (by its base name).
func fill(manifest string, sum func(name string) (string, error)) (string, error) {
	lines := strings.Split(manifest, "\n")
	archive := ""
	for i, line := range lines {
		key, value, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch key {
		case "uri":
			archive = path.Base(strings.TrimSpace(value))
		case "sha256":
			if archive == "" {
				return "", fmt.Errorf("line %d: sha256 without a uri before it", i+1)
			}
			s, err := sum(archive)
			if err != nil {
				return "", err
			}
			indent := line[:len(line)-len(strings.TrimLeft(line, " "))]
			lines[i] = indent + `sha256: "` + s + `"`
			archive = ""
		}
	}
	return strings.Join(lines, "\n"), nil
}

func fileSHA256(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
