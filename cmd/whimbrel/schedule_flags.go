package main

import (
	"fmt"
	"time"

	"github.com/alecthomas/kong"
)

// rfc3339 is a flag that takes a time in RFC 3339. A missing or bad value
// is a usage error naming the flag (kong prefixes it) and what it wants.
type rfc3339 struct{ time.Time }

const rfc3339Example = "2026-11-21T02:00:00Z"

// Decode implements kong.MapperValue.
func (t *rfc3339) Decode(ctx *kong.DecodeContext) error {
	tok, err := ctx.Scan.PopValue("time")
	if err != nil {
		// kong's own error, which the CLI rewrites to say that the flag
		// needs a value and which (cli's explain).
		return err
	}
	s := fmt.Sprint(tok.Value)
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return fmt.Errorf("%q is not a time in RFC 3339: give one such as %s", s, rfc3339Example)
	}
	t.Time = v
	return nil
}
