package docs_test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"

	. "github.com/onsi/gomega"
)

// frontPageLimit is the most README.md may hold: the front page says what
// this is, how to run it and where the rest is; the rest lives in docs/.
const frontPageLimit = 15000

var (
	// inlineLink matches [text](target) and ![alt](target), with an optional
	// <target> and "title".
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	// referenceDef matches a reference definition: [label]: target.
	referenceDef = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$`)
	// codeSpan matches an inline code span, whose text is no link.
	codeSpan = regexp.MustCompile("`[^`]*`")
	// atxHeading matches "## Heading", the closing #s left out.
	atxHeading = regexp.MustCompile(`^ {0,3}#{1,6}(?:\s+(.*?))?(?:\s+#+)?\s*$`)
	// htmlAnchor matches an explicit anchor: <a name="x"> or id="x".
	htmlAnchor = regexp.MustCompile(`<[^>]*\s(?:name|id)="([^"]+)"`)
	// fence opens or closes a fenced code block.
	fence = regexp.MustCompile("^ {0,3}(```|~~~)")
	// scheme marks an absolute URL (https:, mailto:...), which is not checked.
	scheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	// lineAnchor is GitHub's #L10 or #L10-L20 on a file that is not Markdown.
	lineAnchor = regexp.MustCompile(`^L\d+(-L\d+)?$`)
)

// link is one link found in a Markdown file.
type link struct {
	file   string // relative to the repository root
	line   int
	target string
}

// repoRoot finds the repository root: the nearest directory above the test
// holding go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// markdownFiles lists README.md and every .md file under docs/, relative to
// root.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") {
			return err
		}
		rel, err := filepath.Rel(root, path)
		files = append(files, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	return files
}

// proseLines calls fn for each line of a Markdown text outside fenced code
// blocks, with its number.
func proseLines(text string, fn func(n int, line string)) {
	inFence := ""
	for i, line := range strings.Split(text, "\n") {
		if m := fence.FindStringSubmatch(line); m != nil {
			switch {
			case inFence == "":
				inFence = m[1]
			case m[1] == inFence:
				inFence = ""
			}
			continue
		}
		if inFence == "" {
			fn(i+1, line)
		}
	}
}

// linksOf returns the links of one Markdown text, code left out.
func linksOf(file, text string) []link {
	var links []link
	proseLines(text, func(n int, line string) {
		if m := referenceDef.FindStringSubmatch(line); m != nil {
			links = append(links, link{file: file, line: n, target: m[1]})
			return
		}
		for _, m := range inlineLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			links = append(links, link{file: file, line: n, target: m[1]})
		}
	})
	return links
}

// slug is GitHub's anchor for a heading's text: the rendered text in lower
// case, without punctuation but hyphens and underscores, spaces turned into
// hyphens.
func slug(heading string) string {
	text := inlineLink.ReplaceAllStringFunc(heading, func(s string) string {
		return s[strings.Index(s, "[")+1 : strings.Index(s, "]")]
	})
	text = regexp.MustCompile(`<[^>]*>`).ReplaceAllString(text, "")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.Pc):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchorsOf returns every anchor a Markdown text has on GitHub: one per
// heading (a repeated one gets -1, -2...) and the explicit HTML anchors.
func anchorsOf(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	proseLines(text, func(_ int, line string) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		m := atxHeading.FindStringSubmatch(line)
		if m == nil {
			return
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			anchors[s] = true
		}
		seen[s]++
	})
	return anchors
}

// brokenLinks checks every relative link of files (relative to root) and
// returns one message per broken link, and how many links it checked.
func brokenLinks(root string, files []string) (broken []string, checked int) {
	anchors := map[string]map[string]bool{}
	anchorsIn := func(file string) (map[string]bool, error) {
		if a, ok := anchors[file]; ok {
			return a, nil
		}
		b, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			return nil, err
		}
		anchors[file] = anchorsOf(string(b))
		return anchors[file], nil
	}
	for _, file := range files {
		b, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			broken = append(broken, err.Error())
			continue
		}
		for _, l := range linksOf(file, string(b)) {
			if scheme.MatchString(l.target) || strings.HasPrefix(l.target, "//") {
				continue
			}
			checked++
			if msg := checkLink(root, l, anchorsIn); msg != "" {
				broken = append(broken, fmt.Sprintf("%s:%d: %s: %s", l.file, l.line, l.target, msg))
			}
		}
	}
	return broken, checked
}

// checkLink says what is wrong with one relative link, or "".
func checkLink(root string, l link, anchorsIn func(string) (map[string]bool, error)) string {
	path, fragment, _ := strings.Cut(l.target, "#")
	path, err := url.PathUnescape(path)
	if err != nil {
		return "not a valid path: " + err.Error()
	}
	target := l.file
	if path != "" {
		target = filepath.ToSlash(filepath.Join(filepath.Dir(l.file), path))
		if strings.HasPrefix(path, "/") || target == ".." || strings.HasPrefix(target, "../") {
			return "points outside the repository; link relative to this file"
		}
		if _, err := os.Stat(filepath.Join(root, target)); err != nil {
			return fmt.Sprintf("no such file or directory %s (paths are relative to %s)", target, filepath.Dir(l.file))
		}
	}
	if fragment == "" {
		return ""
	}
	if !strings.HasSuffix(target, ".md") {
		if lineAnchor.MatchString(fragment) {
			return ""
		}
		return "a #fragment on a file that is not Markdown"
	}
	anchors, err := anchorsIn(target)
	if err != nil {
		return err.Error()
	}
	if !anchors[fragment] {
		return fmt.Sprintf("%s has no heading with the anchor #%s (a heading's anchor is its text in lower case, "+
			"punctuation dropped, spaces as hyphens)", target, fragment)
	}
	return ""
}

func TestEveryRelativeLinkResolves(t *testing.T) {
	g := NewWithT(t)
	root := repoRoot(t)
	broken, checked := brokenLinks(root, markdownFiles(t, root))
	t.Logf("%d relative links checked", checked)
	g.Expect(broken).To(BeEmpty(), "fix these links, or the headings or files they point at")
	g.Expect(checked).To(BeNumerically(">", 50), "the docs link to each other; so few links means the check found none")
}

func TestEveryPageIsInTheIndex(t *testing.T) {
	g := NewWithT(t)
	root := repoRoot(t)
	index, err := os.ReadFile(filepath.Join(root, "docs", "README.md"))
	g.Expect(err).NotTo(HaveOccurred())
	listed := map[string]bool{}
	for _, l := range linksOf("docs/README.md", string(index)) {
		path, _, _ := strings.Cut(l.target, "#")
		listed[filepath.ToSlash(filepath.Join("docs", path))] = true
	}
	for _, file := range markdownFiles(t, root) {
		if strings.HasPrefix(file, "docs/") && file != "docs/README.md" {
			g.Expect(listed).To(HaveKey(file), "add %s to docs/README.md with one line on what it covers", file)
		}
	}
}

func TestFrontPageStaysShort(t *testing.T) {
	g := NewWithT(t)
	info, err := os.Stat(filepath.Join(repoRoot(t), "README.md"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Size()).To(BeNumerically("<", frontPageLimit),
		"README.md is the front page: move details to a page under docs/ and link to it")
}

func TestSlugFollowsGitHub(t *testing.T) {
	for heading, want := range map[string]string{
		"What `make demo` shows":                                               "what-make-demo-shows",
		"Status in Fleet's shapes":                                             "status-in-fleets-shapes",
		"The manager's own cluster (`fleet-local`)":                            "the-managers-own-cluster-fleet-local",
		"HelmOp: a chart without git":                                          "helmop-a-chart-without-git",
		"fleet — GitOps for fleets of Kubernetes clusters":                     "fleet--gitops-for-fleets-of-kubernetes-clusters",
		"Register a cluster from the manager (kubeconfig Secret, Cluster API)": "register-a-cluster-from-the-manager-kubeconfig-secret-cluster-api",
		"See [the install](install.md) first":                                  "see-the-install-first",
		"snake_case and 10,000 × 10":                                           "snake_case-and-10000--10",
	} {
		t.Run(heading, func(t *testing.T) {
			NewWithT(t).Expect(slug(heading)).To(Equal(want))
		})
	}
}

func TestAnchorsOfRepeatedHeadings(t *testing.T) {
	g := NewWithT(t)
	text := "# Page\n## Figures\n```\n## not a heading\n```\n## Figures\n<a name=\"kept\"></a>\n## Figures ##\n"
	g.Expect(anchorsOf(text)).To(Equal(map[string]bool{
		"page": true, "figures": true, "figures-1": true, "figures-2": true, "kept": true,
	}))
}

func TestBrokenLinksAreFound(t *testing.T) {
	g := NewWithT(t)
	root := t.TempDir()
	write := func(name, text string) {
		g.Expect(os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755)).To(Succeed())
		g.Expect(os.WriteFile(filepath.Join(root, name), []byte(text), 0o644)).To(Succeed())
	}
	write("config/app.yaml", "a: 1\n")
	write("docs/page.md", "# Page\n\n## A section\n")
	write("README.md", strings.Join([]string{
		"# Front",
		"[fine](docs/page.md#a-section) [fine](#front) [fine](config/app.yaml#L1) [web](https://example.com/x.md#nope)",
		"[missing file](docs/gone.md) [missing anchor](docs/page.md#no-such-section)",
		"`[in code](docs/gone.md)`",
		"```",
		"[in a fence](docs/gone.md)",
		"```",
		"[ref]: config/missing.yaml",
		"[outside](../elsewhere.md) [fragment on yaml](config/app.yaml#a)",
	}, "\n"))
	broken, checked := brokenLinks(root, []string{"README.md"})
	g.Expect(checked).To(Equal(8))
	g.Expect(broken).To(HaveLen(5))
	g.Expect(broken[0]).To(HavePrefix("README.md:3: docs/gone.md: no such file"))
	g.Expect(broken[1]).To(HavePrefix("README.md:3: docs/page.md#no-such-section: docs/page.md has no heading"))
	g.Expect(broken[2]).To(HavePrefix("README.md:8: config/missing.yaml: no such file"))
	g.Expect(broken[3]).To(HavePrefix("README.md:9: ../elsewhere.md: points outside the repository"))
	g.Expect(broken[4]).To(HavePrefix("README.md:9: config/app.yaml#a: a #fragment on a file that is not Markdown"))
}
