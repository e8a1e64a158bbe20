// Package archtest checks the shape of the module, so that it stays the
// one docs/architecture.md draws: every import points down the levels
// (never up, never sideways between packages of one level), and no file of
// a command under cmd/ grows past what it should hold (flags, --help text,
// wiring, exit codes; the logic lives in the packages). It has no code of
// its own: all of it is tests.
package archtest
