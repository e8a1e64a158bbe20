package archtest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// The documentation is part of the shape of the module: the README is a
// front door of at most maxReadmeLines lines, and every page it leads to
// is reachable, link by link.

// docsRoot is the module's root, two levels above this package.
var docsRoot = filepath.Join("..", "..")

// maxReadmeLines is the most lines README.md may have: what Whimbrel is,
// how to set it up, a tour and links; the rest lives in docs/.
const maxReadmeLines = 250

// TestReadmeIsAFrontDoor fails when README.md grows past maxReadmeLines:
// move the new text to its page under docs/ and link to it.
func TestReadmeIsAFrontDoor(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(docsRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, more than %d: move the detail to its page under docs/ (see docs/README.md) and link to it", n, maxReadmeLines)
	}
}

// docPages lists the pages whose relative links are checked: the README,
// CONTRIBUTING.md, the measurements beside them, and every page of docs/.
func docPages(t *testing.T) []string {
	t.Helper()
	pages := []string{"README.md", "CONTRIBUTING.md", "BENCHMARKS.md", "RELIABILITY.md"}
	more, err := filepath.Glob(filepath.Join(docsRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(more) == 0 {
		t.Fatal("no docs/*.md found: is the test run from internal/archtest?")
	}
	for _, p := range more {
		rel, err := filepath.Rel(docsRoot, p)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, filepath.ToSlash(rel))
	}
	return pages
}

// TestDocLinksResolve fails for a relative link in the documentation that
// names a file that does not exist, or a heading that the page it points
// to does not have.
func TestDocLinksResolve(t *testing.T) {
	read := func(page string) (string, error) {
		b, err := os.ReadFile(filepath.Join(docsRoot, filepath.FromSlash(page)))
		return string(b), err
	}
	exists := func(path string) bool {
		_, err := os.Stat(filepath.Join(docsRoot, filepath.FromSlash(path)))
		return err == nil
	}
	checked := 0
	for _, page := range docPages(t) {
		text, err := read(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, problem := range brokenLinks(page, text, exists, read) {
			t.Error(problem)
		}
		checked += len(markdownLinks(text))
	}
	if checked < 100 {
		t.Errorf("only %d links found in the documentation: is the link pattern still right?", checked)
	}
}

// TestDocLinkCheckFindsBrokenLinks proves the check can fail: a missing
// file, a missing anchor on another page and on the same page are each
// reported, and links inside code are not links.
func TestDocLinkCheckFindsBrokenLinks(t *testing.T) {
	pages := map[string]string{
		"docs/a.md": "# Page A\n\n## The `whimbrel run` command: here\n\nText.\n",
	}
	read := func(p string) (string, error) {
		if s, ok := pages[p]; ok {
			return s, nil
		}
		return "", os.ErrNotExist
	}
	exists := func(p string) bool { _, ok := pages[p]; return ok }
	tests := []struct {
		text string
		want string // "" : no problem
	}{
		{"[ok](a.md)", ""},
		{"[ok](a.md#the-whimbrel-run-command-here)", ""},
		{"[ok](#page-b)", ""},
		{"[ok](https://example.com/x.md#nothing)", ""},
		{"`[not a link](nothing.md)`", ""},
		{"```\n[not a link](nothing.md)\n```", ""},
		{"[gone](c.md)", "docs/c.md does not exist"},
		{"[gone](../README.md)", "README.md does not exist"},
		{"[bad anchor](a.md#the-whimbrel-run-command)", `has no heading "#the-whimbrel-run-command"`},
		{"[bad anchor](#page-c)", `has no heading "#page-c"`},
	}
	for _, tt := range tests {
		text := "# Page B\n\n" + tt.text + "\n"
		pages["docs/b.md"] = text
		got := brokenLinks("docs/b.md", text, exists, read)
		switch {
		case tt.want == "" && len(got) > 0:
			t.Errorf("%q: reported %q, want nothing", tt.text, got)
		case tt.want != "" && (len(got) != 1 || !strings.Contains(got[0], tt.want)):
			t.Errorf("%q: reported %q, want one problem containing %q", tt.text, got, tt.want)
		}
	}
}

// TestHeadingAnchors checks the slugs against GitHub's rules: lower case,
// punctuation dropped (but '-' and '_'), spaces as '-', a repeated slug
// numbered.
func TestHeadingAnchors(t *testing.T) {
	text := "# Whimbrel\n## Running a workflow here and now: `whimbrel run`\n## `workflow_request`\n" +
		"### Sharded state index (schema version 3)\n## Data: params, output, progress\n## Data: params, output, progress\n" +
		"```\n# not a heading\n```\n## Écrire à l'API\n"
	got := headingAnchors(text)
	for _, want := range []string{"whimbrel", "running-a-workflow-here-and-now-whimbrel-run", "workflow_request",
		"sharded-state-index-schema-version-3", "data-params-output-progress", "data-params-output-progress-1", "écrire-à-lapi"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Errorf("a line in a code block became an anchor")
	}
}

var (
	linkPattern = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	codeSpan    = regexp.MustCompile("`[^`\n]*`")
)

// stripCode blanks fenced code blocks and inline code, where brackets are
// not links and '#' lines are not headings.
func stripCode(text string) string {
	var out []string
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			out = append(out, "")
			continue
		}
		if fenced {
			out = append(out, "")
			continue
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// markdownLinks returns the targets of the page's links and images.
func markdownLinks(text string) []string {
	var out []string
	for _, m := range linkPattern.FindAllStringSubmatch(codeSpan.ReplaceAllString(stripCode(text), ""), -1) {
		out = append(out, m[1])
	}
	return out
}

// brokenLinks lists the relative links of page (a path from the module's
// root) whose file or heading does not exist; exists and read look a path
// from the module's root up.
func brokenLinks(page, text string, exists func(string) bool, read func(string) (string, error)) []string {
	var problems []string
	for _, target := range markdownLinks(text) {
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		file, anchor, _ := strings.Cut(target, "#")
		dest := page
		if file != "" {
			dest = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(page), file)))
			if !exists(dest) {
				problems = append(problems, fmt.Sprintf("%s: link %q: %s does not exist", page, target, dest))
				continue
			}
		}
		if anchor == "" || !strings.HasSuffix(dest, ".md") {
			continue
		}
		destText, err := read(dest)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: link %q: read %s: %v", page, target, dest, err))
			continue
		}
		if !headingAnchors(destText)[anchor] {
			problems = append(problems, fmt.Sprintf("%s: link %q: %s has no heading %q", page, target, dest, "#"+anchor))
		}
	}
	return problems
}

// headingAnchors returns the anchors GitHub gives the page's headings.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range strings.Split(stripCode(text), "\n") {
		trimmed := strings.TrimLeft(line, "#")
		if n := len(line) - len(trimmed); n == 0 || n > 6 || !strings.HasPrefix(trimmed, " ") {
			continue
		}
		slug := slugify(strings.TrimSpace(trimmed))
		if k := seen[slug]; k > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, k)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors
}

// slugify is GitHub's heading anchor: the text in lower case, with every
// character but letters, digits, spaces, '-' and '_' dropped, and each
// space a '-'. Markdown links in a heading count by their text.
func slugify(heading string) string {
	heading = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// TestCodeCitationsResolve fails for a Go file that cites a page of docs/
// (docs/contract.md#section, as comments cite the contract) that does not
// exist or has no such heading: a section renamed must take its citations
// along.
func TestCodeCitationsResolve(t *testing.T) {
	cite := regexp.MustCompile(`docs/[A-Za-z0-9_-]+\.md(#[A-Za-z0-9_-]+)?`)
	read := func(page string) (string, error) {
		b, err := os.ReadFile(filepath.Join(docsRoot, filepath.FromSlash(page)))
		return string(b), err
	}
	exists := func(path string) bool {
		_, err := os.Stat(filepath.Join(docsRoot, filepath.FromSlash(path)))
		return err == nil
	}
	cited := 0
	err := filepath.WalkDir(docsRoot, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == ".build" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || d.Name() == "docs_test.go" && filepath.Base(filepath.Dir(path)) == "archtest" {
			return nil // this file's citations are examples
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(docsRoot, path)
		for _, c := range cite.FindAllString(string(b), -1) {
			cited++
			// Resolve the citation as a link from the module's root.
			for _, problem := range brokenLinks("README.md", "["+c+"]("+c+")", exists, read) {
				t.Errorf("%s cites %s: %s", rel, c, problem)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cited < 10 {
		t.Errorf("only %d citations of docs/ found in Go files: is the pattern still right?", cited)
	}
}
