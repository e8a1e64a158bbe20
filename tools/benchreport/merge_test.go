package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hand is a section no run of benchreport writes, with what a careless
// split would trip on: a generated heading in a fenced block, a
// subsection, and trailing blanks.
const hand = "## DAG hop (hand)\n\nMeasured by hand:\n\n```\n## Fan-out\n```\n\n### A subsection\n\n    BenchmarkX  3  1.0 ms  \n\n"

func TestMergeReport(t *testing.T) {
	old := "# Benchmarks\n\nOld intro, edited by hand.\n\n" +
		"## Throughput\n\nold throughput\n\n" +
		hand +
		"## Fan-out\n\nold fan-out\n\n" +
		"## Beside Temporal\n\nby hand, last\n"
	gen := "# Benchmarks\n\nNew intro.\n\n" +
		"## Fan-out\n\nnew fan-out\n\n" +
		"## Throughput\n\nnew throughput\n\n" +
		"## Monitor sweep cost against history\n\nnew sweep\n\n"
	want := "# Benchmarks\n\nNew intro.\n\n" +
		"## Throughput\n\nnew throughput\n\n" + // replaced in place
		hand + // kept byte for byte
		"## Fan-out\n\nnew fan-out\n\n" + // replaced in place, not in gen's order
		"## Beside Temporal\n\nby hand, last\n" + // kept
		"## Monitor sweep cost against history\n\nnew sweep\n\n" // new: at the end
	if got := mergeReport(old, gen); got != want {
		t.Errorf("merged:\n%s\nwant:\n%s", got, want)
	}
}

func TestMergeReportPartialKeepsIntro(t *testing.T) {
	old := "# Benchmarks\n\nThe intro.\n\n## Throughput\n\nold\n\n## Kept\n\nhand\n"
	gen := "## Throughput\n\nnew\n\n"
	want := "# Benchmarks\n\nThe intro.\n\n## Throughput\n\nnew\n\n## Kept\n\nhand\n"
	if got := mergeReport(old, gen); got != want {
		t.Errorf("merged:\n%q\nwant:\n%q", got, want)
	}
}

func TestMergeReportHeadingAtEndOfFile(t *testing.T) {
	// The last line of the file is a heading with no newline after it:
	// a hand one stays and the new section starts on a line of its own; a
	// generated one is replaced.
	if got, want := mergeReport("intro\n\n## Hand", "## New\n\nnew\n"), "intro\n\n## Hand\n## New\n\nnew\n"; got != want {
		t.Errorf("hand heading at the end: %q, want %q", got, want)
	}
	if got, want := mergeReport("intro\n\n## Fan-out", "## Fan-out\n\nnew\n"), "intro\n\n## Fan-out\n\nnew\n"; got != want {
		t.Errorf("generated heading at the end: %q, want %q", got, want)
	}
}

func TestMergeReportWithoutHeadings(t *testing.T) {
	// A file with no level-2 heading is all intro: a run that writes an
	// intro replaces it, one that does not keeps it and appends.
	if got, want := mergeReport("notes\n", "# Benchmarks\n\nintro\n\n## A\n\na\n"), "# Benchmarks\n\nintro\n\n## A\n\na\n"; got != want {
		t.Errorf("with an intro: %q, want %q", got, want)
	}
	if got, want := mergeReport("notes", "## A\n\na\n"), "notes\n## A\n\na\n"; got != want {
		t.Errorf("without an intro: %q, want %q", got, want)
	}
	if got, want := mergeReport("", "## A\n\na\n"), "## A\n\na\n"; got != want {
		t.Errorf("into an empty file: %q, want %q", got, want)
	}
}

func TestMergeReportDoubledSection(t *testing.T) {
	// A generated section the file holds twice is replaced once.
	old := "## Fan-out\n\none\n\n## Hand\n\nh\n\n## Fan-out\n\ntwo\n\n"
	want := "## Fan-out\n\nnew\n\n## Hand\n\nh\n\n"
	if got := mergeReport(old, "## Fan-out\n\nnew\n\n"); got != want {
		t.Errorf("merged: %q, want %q", got, want)
	}
}

func TestMergeReportCRLF(t *testing.T) {
	// A file saved with CRLF line endings: its headings still match, and
	// its hand sections keep their CRLFs.
	old := "intro\r\n\r\n## Fan-out \r\n\r\nold\r\n\r\n## Hand\r\n\r\nh\r\n"
	want := "intro\r\n\r\n## Fan-out\n\nnew\n\n## Hand\r\n\r\nh\r\n"
	if got := mergeReport(old, "## Fan-out\n\nnew\n\n"); got != want {
		t.Errorf("merged: %q, want %q", got, want)
	}
}

func TestWriteReport(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "BENCHMARKS.md")
	if err := writeReport(out, "# B\n\n## Fan-out\n\nfirst\n\n"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, []byte("# B\n\n## Fan-out\n\nfirst\n\n"+hand), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeReport(out, "## Fan-out\n\nsecond\n\n"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if want := "# B\n\n## Fan-out\n\nsecond\n\n" + hand; string(got) != want {
		t.Errorf("file holds %q, want %q", got, want)
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v (%v), want 0644", fi.Mode(), err)
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 1 {
		t.Errorf("the folder holds %d files, want only the report", len(left))
	}
	// A report that cannot be read is an error, not a fresh file.
	if err := writeReport(dir, "## A\n"); err == nil || !strings.Contains(err.Error(), "read report") {
		t.Errorf("writing over a folder: %v, want a read error", err)
	}
}
