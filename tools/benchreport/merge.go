package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The report file holds sections benchreport writes beside sections written
// by hand or by other commands (figures measured once, benchmarks of other
// packages). Writing into a file that exists therefore replaces only the
// level-2 sections this run wrote, matched by their heading line, and
// keeps every other section where it is, byte for byte; the generated
// sections the file does not hold yet go at its end. The intro (the text
// before the first level-2 heading) is replaced only when this run wrote
// one.

// section is one level-2 section of a Markdown report: its heading line
// through the line before the next level-2 heading (or the end).
type section struct {
	key  string // the heading line without line ending or trailing blanks
	text string
}

// splitSections splits doc into its intro and its level-2 sections. A line
// starting "## " inside a fenced code block is not a heading.
func splitSections(doc string) (intro string, secs []section) {
	var starts []int
	fenced := false
	for off := 0; off < len(doc); {
		next := len(doc)
		if i := strings.IndexByte(doc[off:], '\n'); i >= 0 {
			next = off + i + 1
		}
		line := doc[off:next]
		switch {
		case strings.HasPrefix(line, "```") || strings.HasPrefix(line, "~~~"):
			fenced = !fenced
		case !fenced && strings.HasPrefix(line, "## "):
			starts = append(starts, off)
		}
		off = next
	}
	if len(starts) == 0 {
		return doc, nil
	}
	intro = doc[:starts[0]]
	for i, s := range starts {
		end := len(doc)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		text := doc[s:end]
		heading, _, _ := strings.Cut(text, "\n")
		secs = append(secs, section{key: strings.TrimRight(heading, " \t\r"), text: text})
	}
	return intro, secs
}

// mergeReport returns old with the sections of gen in it: each section of
// gen replaces the first of old with the same heading (later ones with that
// heading are dropped, so that a doubled section heals), the others of gen
// follow at the end, and every section of old that gen does not have stays
// as it is. gen's intro, if it has one, replaces old's.
func mergeReport(old, gen string) string {
	oldIntro, oldSecs := splitSections(old)
	genIntro, genSecs := splitSections(gen)
	byKey := map[string]string{}
	for _, s := range genSecs {
		if _, ok := byKey[s.key]; !ok {
			byKey[s.key] = s.text
		}
	}
	var b strings.Builder
	// add appends a piece, starting it on a line of its own.
	add := func(s string) {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteString("\n")
		}
		b.WriteString(s)
	}
	if strings.TrimSpace(genIntro) != "" {
		add(genIntro)
	} else {
		add(oldIntro)
	}
	placed := map[string]bool{}
	for _, s := range oldSecs {
		text, generated := byKey[s.key]
		switch {
		case !generated:
			add(s.text)
		case !placed[s.key]:
			add(text)
			placed[s.key] = true
		}
	}
	for _, s := range genSecs {
		if !placed[s.key] {
			add(s.text)
			placed[s.key] = true
		}
	}
	return b.String()
}

// writeReport writes the Markdown to stdout for "-", and otherwise merges
// it into the file out (mergeReport), replacing the file whole by a rename
// so that a run that dies half way leaves the old one.
func writeReport(out, markdown string) error {
	if out == "-" {
		_, err := os.Stdout.WriteString(markdown)
		return err
	}
	old, err := os.ReadFile(out)
	switch {
	case err == nil:
		markdown = mergeReport(string(old), markdown)
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("read report %s: %w", out, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), ".benchreport-*")
	if err != nil {
		return fmt.Errorf("write report %s: %w", out, err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if _, err := tmp.WriteString(markdown); err != nil {
		tmp.Close()
		return fmt.Errorf("write report %s: %w", out, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write report %s: %w", out, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("write report %s: %w", out, err)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return fmt.Errorf("write report %s: %w", out, err)
	}
	return nil
}
