package inert

import (
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"nightly-etl::0b0e3c0f", "nightly-etl::0b0e3c0f"},
		{"plain text, with spaces: é ✓ 日本", "plain text, with spaces: é ✓ 日本"},
		{"clear\x1b[2Jscreen", `clear\x1b[2Jscreen`},
		{"bell\a", `bell\a`},
		{"a\nb\rc\td", `a\nb\rc\td`},
		{"del\x7f", `del\x7f`},
		{"c1\u009b31m", `c1\u009b31m`},
		{"bidi\u202eevil", `bidi\u202eevil`},
		{"bad\xffutf8", `bad\xffutf8`},
		{"", ""},
	} {
		got := String(tc.in)
		if got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
		}
		for _, r := range got {
			if unsafeRune(r) {
				t.Errorf("String(%q) = %q still holds %U", tc.in, got, r)
			}
		}
	}
}

func TestLines(t *testing.T) {
	got := Lines("first\x1b]0;title\a\nsecond\r")
	if len(got) != 2 || got[0] != `first\x1b]0;title\a` || got[1] != `second\r` {
		t.Errorf("Lines: got %q", got)
	}
	if strings.ContainsAny(strings.Join(got, ""), "\x1b\a\r") {
		t.Errorf("Lines left a control character: %q", got)
	}
}

func FuzzString(f *testing.F) {
	f.Add("x\x1b[2J\a\u202e\xff")
	f.Fuzz(func(t *testing.T, s string) {
		for _, r := range String(s) {
			if unsafeRune(r) {
				t.Fatalf("String(%q) holds %U", s, r)
			}
		}
	})
}
