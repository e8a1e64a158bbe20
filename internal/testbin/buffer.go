package testbin

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer that a test may read while a child process
// writes it (through exec's copying goroutine, as cmd.Stdout or
// cmd.Stderr).
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
