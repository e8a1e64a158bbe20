// Package inert makes text from the store safe to show on a terminal.
//
// Ids, names, reasons and stderr tails come from items any client with
// write access can change (and from commands' own output): shown raw, an
// ESC [2J or a BEL in them would clear, retitle or rewrite an operator's
// screen. String escapes every control character, in Go's %q style, and
// leaves everything else as it was, so ordinary text reads unchanged. JSON
// output does not go through here: encoding/json already escapes what it
// must, and scripts need the exact values.
package inert

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// String returns s with every control character (C0, DEL, C1), every
// Unicode bidirectional or line/paragraph separator format character, and
// every invalid UTF-8 byte escaped as strconv.Quote would write it.
// Printable text, spaces included, is left alone.
func String(s string) string {
	i := strings.IndexFunc(s, unsafeRune)
	if i < 0 && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x` + strconv.FormatUint(uint64(s[0])>>4, 16) + strconv.FormatUint(uint64(s[0])&0xF, 16))
		case unsafeRune(r):
			q := strconv.QuoteRuneToASCII(r) // '\x1b', '\a', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[:size])
		}
		s = s[size:]
	}
	return b.String()
}

// Lines splits s into lines and makes each inert: a stderr tail keeps its
// shape, but no line can move the cursor or carry an escape sequence.
// A tab is kept: stack traces indent with it, and it moves nothing.
func Lines(s string) []string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		parts := strings.Split(l, "\t")
		for j, p := range parts {
			parts[j] = String(p)
		}
		lines[i] = strings.Join(parts, "\t")
	}
	return lines
}

// unsafeRune reports a rune a terminal may act on instead of showing:
// controls, and the format characters that reorder or break what follows
// (bidi overrides, line and paragraph separators).
func unsafeRune(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
		return true
	case r == '\u2028', r == '\u2029', r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069', r == '\u200e', r == '\u200f', r == '\u061c':
		return true
	}
	return r == utf8.RuneError || unicode.Is(unicode.Cc, r)
}
