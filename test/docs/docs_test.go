package docs_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode"

	"sigs.k8s.io/yaml"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// A YAML block whose first line is this comment shows a policy the operator
// refuses: the test expects its decoding or compilation to fail with an
// error containing the text after the colon.
var invalidMarker = regexp.MustCompile(`^#\s*invalid:\s*(.+?)\s*$`)

// markdownFiles are the README and every page of docs/ and its folders, relative to the
// repository's root.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	root := testenv.RepoRoot()
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".md") {
			return err
		}
		rel, err := filepath.Rel(root, p)
		files = append(files, rel)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// block is a fenced code block of a Markdown file.
type block struct {
	lang  string // the first word of the info string
	info  string // the whole info string
	line  int    // the line of the opening fence, from 1
	lines []string
}

// markdown is a Markdown file split into its code blocks and the lines
// outside them.
type markdown struct {
	blocks []block
	// prose are the lines outside code blocks, by line number.
	prose map[int]string
}

var fence = regexp.MustCompile("^( {0,3})(`{3,}|~{3,})\\s*(.*)$")

func parseMarkdown(t *testing.T, file string) markdown {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), file))
	if err != nil {
		t.Fatal(err)
	}
	return parseMarkdownText(t, file, raw)
}

// parseMarkdownText splits the Markdown raw, named file in errors.
func parseMarkdownText(t *testing.T, file string, raw []byte) markdown {
	t.Helper()
	md := markdown{prose: map[int]string{}}
	var (
		open   *block
		marker string
		indent int
	)
	s := bufio.NewScanner(bytes.NewReader(raw))
	s.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; s.Scan(); n++ {
		line := s.Text()
		m := fence.FindStringSubmatch(line)
		switch {
		case open == nil && m != nil:
			info := strings.TrimSpace(m[3])
			lang, _, _ := strings.Cut(info, " ")
			open, marker, indent = &block{lang: lang, info: info, line: n}, m[2], len(m[1])
		case open != nil && m != nil && strings.HasPrefix(m[2], marker[:1]) && len(m[2]) >= len(marker) && m[3] == "":
			md.blocks = append(md.blocks, *open)
			open = nil
		case open != nil:
			// Content lines lose up to the fence's indentation.
			trimmed := strings.TrimLeft(line, " ")
			cut := min(indent, len(line)-len(trimmed))
			open.lines = append(open.lines, line[cut:])
		default:
			md.prose[n] = line
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if open != nil {
		t.Errorf("%s:%d: code block not closed", file, open.line)
	}
	return md
}

// document is one YAML document of a block, with the line it starts on.
type document struct {
	line int
	text string
}

// documents splits a YAML block at its `---` lines.
func documents(b block) []document {
	var out []document
	start, cur := b.line+1, []string{}
	flush := func() {
		if strings.TrimSpace(strings.Join(cur, "")) != "" {
			out = append(out, document{line: start, text: strings.Join(cur, "\n") + "\n"})
		}
	}
	for i, l := range b.lines {
		if strings.TrimRight(l, " ") == "---" {
			flush()
			start, cur = b.line+2+i, nil
			continue
		}
		cur = append(cur, l)
	}
	flush()
	return out
}

var (
	envOnce sync.Once
	env     *cel.Env
	envErr  error
)

// compilerEnv is the operator's CEL environment, typed by the OCM and policy
// CRDs in bin/crds (or $CLEANUP_CRDS_DIR), as the operator types it on a hub.
func compilerEnv(t *testing.T) *cel.Env {
	t.Helper()
	envOnce.Do(func() {
		crds, err := testenv.LoadCRDs()
		if err != nil {
			envErr = err
			return
		}
		schemas, err := cel.SchemasFromCRDs(crds)
		if err != nil {
			envErr = err
			return
		}
		if schemas.ManagedCluster == nil || schemas.ManifestWork == nil || schemas.ConfigurationPolicy == nil {
			envErr = fmt.Errorf("the ManagedCluster, ManifestWork and ConfigurationPolicy CRDs are not all in the CRDs folder: run 'make crds'")
			return
		}
		env, envErr = cel.NewEnv(schemas)
	})
	if envErr != nil {
		t.Fatal(envErr)
	}
	return env
}

// checkPolicy decodes a CleanupPolicy strictly and compiles it, and returns
// what went wrong.
func checkPolicy(t *testing.T, text string) error {
	t.Helper()
	var head struct {
		APIVersion string `json:"apiVersion"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec map[string]any `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(text), &head); err != nil {
		return err
	}
	switch {
	case head.APIVersion != v1alpha1.GroupVersion.String():
		return fmt.Errorf("apiVersion is %q, not %s", head.APIVersion, v1alpha1.GroupVersion)
	case head.Metadata.Name == "":
		return fmt.Errorf("metadata.name is missing: show a whole object")
	case head.Spec == nil:
		return fmt.Errorf("spec is missing: show a whole object")
	}
	var p v1alpha1.CleanupPolicy
	if err := yaml.UnmarshalStrict([]byte(text), &p); err != nil {
		return fmt.Errorf("decoding: %w", err)
	}
	if _, errs := cel.Compile(compilerEnv(t), &p); len(errs) > 0 {
		return fmt.Errorf("compiling: %w", errs.ToAggregate())
	}
	return nil
}

// TestDocumentedPoliciesCompile decodes every CleanupPolicy of the README and
// of docs/ into the API type, refusing unknown fields, and compiles it with
// the operator's compiler. A block marked `# invalid: <text>` must fail with
// an error containing <text>.
func TestDocumentedPoliciesCompile(t *testing.T) {
	valid, invalid := 0, 0
	for _, file := range markdownFiles(t) {
		for _, b := range parseMarkdown(t, file).blocks {
			if b.lang != "yaml" && b.lang != "yml" {
				continue
			}
			want := ""
			if len(b.lines) > 0 {
				if m := invalidMarker.FindStringSubmatch(strings.TrimSpace(b.lines[0])); m != nil {
					want = m[1]
				}
			}
			policies := 0
			for _, d := range documents(b) {
				var head struct {
					Kind string `json:"kind"`
				}
				if err := yaml.Unmarshal([]byte(d.text), &head); err != nil {
					if strings.Contains(d.text, "kind: CleanupPolicy") {
						t.Errorf("%s:%d: not YAML: %v", file, d.line, err)
					}
					continue // a fragment of something else
				}
				if head.Kind != "CleanupPolicy" {
					continue
				}
				policies++
				err := checkPolicy(t, d.text)
				switch {
				case want == "" && err != nil:
					t.Errorf("%s:%d: %v", file, d.line, err)
				case want == "":
					valid++
				case err == nil:
					t.Errorf("%s:%d: marked invalid (%q), but the policy decodes and compiles", file, d.line, want)
				case !strings.Contains(err.Error(), want):
					t.Errorf("%s:%d: marked invalid with %q, but the error is: %v", file, d.line, want, err)
				default:
					invalid++
				}
			}
			if want != "" && policies == 0 {
				t.Errorf("%s:%d: marked invalid, but the block holds no CleanupPolicy", file, b.line)
			}
		}
	}
	// The README's policy and the field reference's examples at least: an
	// extractor that finds nothing would pass without checking anything.
	if valid < 10 || invalid < 1 {
		t.Errorf("found %d valid and %d invalid documented policies; expected at least 10 and 1", valid, invalid)
	}
	t.Logf("%d valid and %d invalid documented policies checked", valid, invalid)
}

var (
	inlineLink = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refLink    = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	scheme     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	heading    = regexp.MustCompile(`^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$`)
)

// TestRelativeLinksResolve checks that every relative link of the README and
// of docs/ points to a file or folder of the repository, and that a link to
// a heading of a Markdown file names one that exists.
func TestRelativeLinksResolve(t *testing.T) {
	root := testenv.RepoRoot()
	anchors := map[string]map[string]bool{}
	anchorsOf := func(file string) map[string]bool {
		if a, ok := anchors[file]; ok {
			return a
		}
		a := headingAnchors(parseMarkdown(t, file))
		anchors[file] = a
		return a
	}
	links := 0
	for _, file := range markdownFiles(t) {
		md := parseMarkdown(t, file)
		for n, line := range md.prose {
			line = codeSpan.ReplaceAllString(line, "")
			var targets []string
			for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
				targets = append(targets, m[1])
			}
			if m := refLink.FindStringSubmatch(line); m != nil {
				targets = append(targets, m[1])
			}
			for _, target := range targets {
				if scheme.MatchString(target) || strings.HasPrefix(target, "//") {
					continue // not relative
				}
				links++
				path, fragment, _ := strings.Cut(target, "#")
				path, _, _ = strings.Cut(path, "?")
				if p, err := url.PathUnescape(path); err == nil {
					path = p
				}
				resolved := file
				if path != "" {
					resolved = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
				}
				if rel, err := filepath.Rel(root, filepath.Join(root, resolved)); err != nil || strings.HasPrefix(rel, "..") {
					t.Errorf("%s:%d: link %q leaves the repository", file, n, target)
					continue
				}
				info, err := os.Stat(filepath.Join(root, resolved))
				if err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", file, n, target, resolved)
					continue
				}
				if fragment != "" && !info.IsDir() && strings.HasSuffix(resolved, ".md") && !anchorsOf(resolved)[fragment] {
					t.Errorf("%s:%d: link %q: %s has no heading #%s", file, n, target, resolved, fragment)
				}
			}
		}
	}
	if links == 0 {
		t.Error("found no relative link at all")
	}
	t.Logf("%d relative links checked", links)
}

// headingAnchors are the anchors GitHub gives a file's headings: lower case,
// punctuation dropped, spaces turned into hyphens, repeats numbered.
func headingAnchors(md markdown) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	lines := make([]int, 0, len(md.prose))
	for n := range md.prose {
		lines = append(lines, n)
	}
	slices.Sort(lines)
	for _, n := range lines {
		m := heading.FindStringSubmatch(md.prose[n])
		if m == nil {
			continue
		}
		text := inlineLink.ReplaceAllStringFunc(m[1], func(s string) string {
			// Keep a link's text, drop its target.
			return s[strings.Index(s, "[")+1 : strings.LastIndex(s, "](")]
		})
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		anchor := b.String()
		if k := seen[anchor]; k > 0 {
			out[fmt.Sprintf("%s-%d", anchor, k)] = true
		} else {
			out[anchor] = true
		}
		seen[anchor]++
	}
	return out
}
