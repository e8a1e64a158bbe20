//go:build linux

package process

import (
	"errors"
	"io"
	"sync"
)

// copyBufferSize is the chunk size for copying stderr.
const copyBufferSize = 32 * 1024

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func newTail(max int) *tail { return &tail{max: max, buf: make([]byte, 0, max)} }

func (t *tail) write(b []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(b) >= t.max {
		t.buf = append(t.buf[:0], b[len(b)-t.max:]...)
		return
	}
	if over := len(t.buf) + len(b) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, b...)
}

func (t *tail) bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]byte(nil), t.buf...)
}

// pump copies the child's stderr to the configured writer and the tail until
// end of file, or until the drain deadline set when the child exits, and then
// publishes the Result. Being the last goroutine to touch stderr, it is the
// one that closes it. It ends once the child has exited, or has been given
// up on (see Close).
func (p *Process) pump() {
	defer p.bg.Done()
	if p.stderr == nil { // the child writes to the terminal itself
		<-p.exited
		p.finish()
		return
	}
	out := p.stderrOut
	buf := make([]byte, copyBufferSize)
	for {
		n, err := p.stderr.Read(buf)
		if n > 0 {
			if out != nil {
				if _, werr := out.Write(buf[:n]); werr != nil {
					// Keep draining into the tail: the record matters more
					// than a broken terminal, and a full pipe would block
					// the child.
					p.log.Warn("stderr passthrough failed", "error", werr)
					out = nil
				}
			}
			p.tail.write(buf[:n])
			select {
			case <-p.exited:
				// Data keeps coming after the exit: keep draining, up to
				// DrainTimeout. exitTime is set before exited is closed.
				_ = p.stderr.SetReadDeadline(p.drainDeadline())
			default:
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				p.log.Debug("stopped copying stderr", "error", err)
			}
			break
		}
	}
	p.stderr.Close()
	<-p.exited
	p.finish()
}
